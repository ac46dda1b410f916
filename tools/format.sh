#!/usr/bin/env bash
# Puts every C++ source of the checkout at .clang-format's fixed point, the layout the lint test
# "lint: clang-format" (tests/format/check_format.py) holds it to.
#   tools/format.sh [FILE...]    the given files, else every tracked or new C++ file
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $tool ]]; then
  echo "tools/format.sh: clang-format not found (apt-get install clang-format-14)" >&2
  exit 1
fi
if (($#)); then
  printf '%s\0' "$@" | xargs -0 "$tool" -i --style=file
else
  git ls-files -z --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' | xargs -0 "$tool" -i --style=file
fi
