#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the Release tree (build/) and the
# sanitizer tree (build-asan/: clang 14, ASan+UBSan, libFuzzer), then runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --test
jobs=$(nproc)

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DVLESSBENCH_SANITIZE=address -DVLESSBENCH_FUZZ=ON >/dev/null
cmake --build build-asan -j "$jobs"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVLESSBENCH_RUNNER_OPENSSL=ON \
  -DVLESSBENCH_SANITIZER_BUILD="$PWD/build-asan" >/dev/null
cmake --build build -j "$jobs"

ctest --test-dir build --output-on-failure -j "$jobs" "$@"
