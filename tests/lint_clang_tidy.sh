#!/usr/bin/env bash
# clang-tidy over our own sources (core/ server/ target/ runner/ .cpp; their headers through
# .clang-tidy's HeaderFilterRegex), with the checks in the repository's .clang-tidy.
#   tests/lint_clang_tidy.sh BUILD_DIR [JOBS]
# BUILD_DIR must hold compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS=ON, set by the
# top-level CMakeLists.txt). Exit 0 with zero warnings, 1 with any, 77 (ctest: skipped) when
# clang-tidy or the database is missing.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [JOBS]}
jobs=${2:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [[ -z $tidy ]]; then
  echo "clang-tidy not found (apt-get install clang-tidy-14): skipped"
  exit 77
fi
if [[ ! -f $build/compile_commands.json ]]; then
  echo "$build/compile_commands.json missing (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON): skipped"
  exit 77
fi
# Each file with the key of what its check depends on: its own text, the text of every header of
# ours it includes (from ninja's dependency log of the build tree; every header of ours when the log
# has no valid entry for the file), .clang-tidy, its compile command and clang-tidy's version. A
# file whose key passed before is not checked again (the cache keeps only clean results, so a
# warning is reported on every run until it is fixed), so a change to one header re-checks only
# the files that include it.
tidy_version=$("$tidy" --version 2>/dev/null | tr '\n' ' ')
deps_log=$(mktemp)
ninja -C "$build" -t deps >"$deps_log" 2>/dev/null || : >"$deps_log"
mapfile -t entries < <(python3 - "$build/compile_commands.json" "$src" "$tidy_version" "$deps_log" <<'PY'
import hashlib, json, os, shlex, sys
db, src, version, deps_log = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3], sys.argv[4]
build = os.path.dirname(os.path.realpath(db))
layers = ("core", "server", "target", "runner")
ours = {}
for layer in layers:
    for root, dirs, names in sorted(os.walk(os.path.join(src, layer))):
        dirs.sort()
        for n in sorted(names):
            if n.endswith((".hpp", ".h", ".inc")):
                path = os.path.join(root, n)
                ours[path] = hashlib.sha256(path.encode() + b"\0" + open(path, "rb").read()).hexdigest()
every_header = "".join(ours[p] for p in sorted(ours))
# ninja -t deps: "OUTPUT: #deps N, deps mtime T (VALID|STALE)" then one indented path per line.
deps, current = {}, None
for line in open(deps_log, errors="replace"):
    if line.startswith("    ") and current is not None:
        path = os.path.realpath(os.path.join(build, line.strip()))
        if path in ours:
            deps[current].add(path)
    elif ": #deps " in line:
        out, _, rest = line.partition(": #deps ")
        current = out if "(VALID)" in rest else None
        if current is not None:
            deps[current] = set()
common = open(os.path.join(src, ".clang-tidy"), "rb").read().hex() + version
seen = set()
for entry in json.load(open(db)):
    f = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(f, src)
    if rel.split(os.sep)[0] in layers and f.endswith(".cpp") and f not in seen:
        seen.add(f)
        args = shlex.split(entry["command"]) if "command" in entry else entry.get("arguments", [])
        output = entry.get("output") or next((b for a, b in zip(args, args[1:]) if a == "-o"), None)
        headers = deps.get(output)
        included = every_header if headers is None else "".join(ours[p] for p in sorted(headers))
        key = hashlib.sha256((common + included + json.dumps(entry, sort_keys=True)).encode() + open(f, "rb").read())
        print(f"{f}\t{key.hexdigest()}")
PY
)
rm -f "$deps_log"
cache=${VLESSBENCH_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vlessbench/clang-tidy}
mkdir -p "$cache" 2>/dev/null || cache=""
declare -A keys
files=()
cached=0
for e in "${entries[@]}"; do
  f=${e%$'\t'*}
  key=${e##*$'\t'}
  if [[ -n $cache && -e $cache/$key.ok ]]; then
    cached=$((cached + 1))
  else
    files+=("$f")
    keys["$f"]=$key
  fi
done
if [[ ${#entries[@]} -eq 0 ]]; then
  echo "no sources of ours in $build/compile_commands.json"
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
# Each file is checked by one clang-tidy; a file whose own log has no diagnostic (a header's warning
# counts for every file that includes it) and whose clang-tidy exited 0 is remembered at once, so a
# run cut short (a timeout) keeps what it finished. A GCC build's database lacks the defines
# cmake/Dependencies.cmake adds for clang (Asio 1.22 with libstdc++'s <coroutine>): the extra
# arguments add them (harmless repeats in a clang build's).
if [[ ${#files[@]} -gt 0 ]]; then
  for f in "${files[@]}"; do printf '%s\t%s\n' "$f" "${keys[$f]}"; done | xargs -P "$jobs" -L1 -d '\n' sh -c '
    tidy=$1 build=$2 out=$3 cache=$4 entry=$5
    f=${entry%%	*} key=${entry##*	}
    log="$out/$(echo "$f" | tr / _).log"
    "$tidy" -p "$build" --quiet --extra-arg=-DASIO_HAS_CO_AWAIT=1 --extra-arg=-DASIO_HAS_STD_COROUTINE=1 \
      --extra-arg=-Wno-unknown-warning-option "$f" >"$log" 2>&1
    rc=$?
    if [ -n "$cache" ] && [ "$rc" -eq 0 ] && ! grep -qE ": (warning|error): " "$log"; then touch "$cache/$key.ok"; fi
  ' sh "$tidy" "$build" "$out" "$cache"
fi
# Each header's warnings appear once per file that includes it: count distinct ones.
warnings=$(cat "$out"/*.log 2>/dev/null | grep -E '^/.*: (warning|error): ' | sort -u)
count=$(printf '%s' "$warnings" | grep -c . || true)
echo "clang-tidy: ${#files[@]} files checked, $cached unchanged since a clean check (cache: ${cache:-none}), $count distinct warning(s)/error(s), $(( $(date +%s) - start ))s with $jobs job(s)"
if [[ $count -gt 0 ]]; then
  # The full diagnostics (with notes and code excerpts) of every file that had any.
  for f in "$out"/*.log; do grep -qE ': (warning|error): ' "$f" && cat "$f"; done
  echo "$warnings"
  exit 1
fi
exit 0
