#!/usr/bin/env bash
# Longer fuzz runs than the suite's 3 s per target (ctest label fuzz), one target after another.
#   tools/fuzz_long.sh [SECONDS_PER_TARGET] [TARGET...]      default: 3600, every target
# Needs the sanitizer tree (tools/test.sh builds build-asan/ with clang 14, ASan+UBSan, libFuzzer).
# The growing corpus is kept in build-asan/fuzz-corpus/TARGET (seeds: tests/fuzz/corpus/TARGET);
# crashes land as crash-*/leak-*/timeout-* files in build-asan/fuzz-out/. Log: fuzz-out/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3600}
shift || true
targets=("$@")
# Every target, as tests/fuzz/fuzzers.cmake names them (the one list).
[[ ${#targets[@]} -gt 0 ]] ||
  read -r -a targets < <(sed -n 's/^set(VLESSBENCH_FUZZERS \(.*\))$/\1/p' tests/fuzz/fuzzers.cmake)
[[ ${#targets[@]} -gt 0 ]] || { echo "no fuzz targets found in tests/fuzz/fuzzers.cmake" >&2; exit 2; }
san=build-asan
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$san/fuzz-out"
status=0
for t in "${targets[@]}"; do
  bin="$san/bin/fuzz_$t"
  [[ -x $bin ]] || { echo "$bin missing: run tools/test.sh (or build $san) first" >&2; exit 2; }
  mkdir -p "$san/fuzz-corpus/$t"
  echo "fuzz_$t: ${seconds}s"
  if ! (cd "$san/fuzz-out" && "../bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        "../fuzz-corpus/$t" "../../tests/fuzz/corpus/$t" > "$t.log" 2>&1); then
    echo "fuzz_$t FAILED: see $san/fuzz-out/$t.log" >&2
    status=1
  fi
  grep -E '^stat::number_of_executed_units|^#[0-9]+ +DONE' "$san/fuzz-out/$t.log" || true
done
exit $status
