#!/usr/bin/env bash
# The README's first command: installs what is missing, builds Release, and runs the demo on the
# embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Only what the demo runs (and `cmake --install` installs): the daemon and the runner, not the unit
# tests, fuzzers and benchmarks of a full build (tools/test.sh builds those). The tree stays
# configured for everything, so a later `cmake --build build` adds the rest.
cmake --build build -j "$(nproc)" --target vlessbenchd vlessbench
exec tools/demo.sh "$@"
