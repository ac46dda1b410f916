#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the Release tree (build/) and the
# sanitizer trees (build-asan/: clang 14, ASan+UBSan, libFuzzer; build-tsan/: clang 14, TSan),
# and the Debian package (tools/package.sh, from build/), then runs every test with one ctest. The
# sanitizer trees build only what their tests run. The system test (label system) installs that
# package into a Debian 12 rootfs booted with systemd-nspawn.
#   tools/test.sh [--arm64] [CTEST ARGS...]
# --arm64 also runs the arm64 system test (label system-arm64: the arm64 package, cross-compiled in
# build-arm64/, booted under qemu-user; too slow for CI's budget, docs/deploy.md section 7), and
# installs what it needs (tools/deps.sh --arch arm64). Without it that label is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
arm64=0
if [[ ${1:-} == --arm64 ]]; then arm64=1; shift; fi
if ((arm64)); then tools/deps.sh --test --arch arm64; else tools/deps.sh --test; fi
jobs=$(nproc)
# The compiler cache (CMakeLists.txt: VLESSBENCH_CCACHE) keys on paths relative to this clone and
# not on the build folder, so a second clone or a rebuilt tree reuses what was compiled before.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Sanitizer trees from CMakePresets.json (asan, tsan: clang 14, -O1 and line tables only, what the
# sanitizers' docs suggest, a quarter less compile time than RelWithDebInfo's -O2 -g).
cmake --preset asan >/dev/null
cmake --build build-asan -j "$jobs" --target unit_tests vlessbenchd fuzzers

cmake --preset tsan >/dev/null
cmake --build build-tsan -j "$jobs" --target unit_tests_threads vlessbenchd vlessbench_load vlessbench

# The Release tree is configured as the package is (tools/package-flags.sh), so the package is
# made from the binaries the suite tests, without a tree of its own.
source tools/package-flags.sh
cmake --preset release "${package_flags[@]}" -DVLESSBENCH_RUNNER_OPENSSL=ON \
  -DVLESSBENCH_SANITIZER_BUILD="$PWD/build-asan" -DVLESSBENCH_TSAN_BUILD="$PWD/build-tsan" >/dev/null
cmake --build build -j "$jobs"
VLESSBENCH_JOBS=$jobs VLESSBENCH_PACKAGE_BUILD=build tools/package.sh --lintian

rc=0
# The qemu guest's path emulation test (label vm, minutes under TCG) runs only when asked:
# ctest --test-dir build -L vm.
exclude=(-LE '^vm$')
if ((!arm64)); then exclude=(-LE '^(system-arm64|vm)$'); fi
ctest --test-dir build --output-on-failure -j "$jobs" "${exclude[@]}" "$@" || rc=$?
# ctest counts a file that skipped as a whole (exit 77); a case skipped in a file whose other cases
# passed shows only as its SKIP line in the log: list them all, so that no skip passes unseen.
if skips=$(grep -h '^SKIP ' build/Testing/Temporary/LastTest.log 2>/dev/null | sort -u) && [[ -n $skips ]]; then
  echo "Skipped (the tests' SKIP lines):"
  echo "$skips"
fi
# The five slowest tests, so that what sets CI's pace is seen in every run.
python3 - build/Testing/Temporary/LastTest.log <<'PY' || true
import re, sys
name, times = None, []
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\d+/\d+ Testing: (.*)", line)
    if m:
        name = m.group(1).strip()
    m = re.match(r"Test time =\s*([\d.]+) sec", line)
    if m and name:
        times.append((float(m.group(1)), name))
        name = None
print("Slowest tests:")
for t, n in sorted(times, reverse=True)[:5]:
    print(f"  {t:7.1f} s  {n}")
PY
exit "$rc"
