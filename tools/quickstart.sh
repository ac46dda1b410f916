#!/usr/bin/env bash
# The README's first command: installs what is missing, builds Release, and runs the demo on the
# embedded defaults (its arguments go to tools/demo.sh: --keep leaves the daemon up at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Only what the demo runs (and `cmake --install` installs): the daemon and the runner, not the unit
# tests, fuzzers and benchmarks of a full build (tools/test.sh builds those). The tree stays
# configured for everything, so a later `cmake --build build` adds the rest.
# Quiet unless it fails: the build's own output is kept in build/quickstart-build.log.
echo "quickstart: building vlessbenchd and vlessbench (Release; a few minutes on 2 cores)..."
if ! cmake --build build -j "$(nproc)" --target vlessbenchd vlessbench >build/quickstart-build.log 2>&1; then
  tail -n 40 build/quickstart-build.log >&2
  echo "quickstart: the build failed (the whole output: build/quickstart-build.log)" >&2
  exit 1
fi
echo "quickstart: built; now the demo (a minute or two)"
exec tools/demo.sh "$@"
