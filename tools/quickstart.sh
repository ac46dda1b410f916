#!/usr/bin/env bash
# The README's first command: installs what is missing, builds Release, and runs the demo on the
# embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
exec tools/demo.sh "$@"
