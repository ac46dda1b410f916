#!/usr/bin/env bash
# Longer load and fault runs than CI affords (docs/reliability.md): the same checks as
# test_load.py and test_faults.py, with bigger numbers, repeated.
#
#   tests/load/soak.sh [BUILD_DIR] [ROUNDS]
#
# Environment (defaults here are the soak values; CI uses the tests' own defaults):
#   VLESSBENCH_LOAD_IDLE      idle sessions (10000; capped by RLIMIT_NOFILE / 2)
#   VLESSBENCH_LOAD_ACTIVE    concurrent active sessions (2000)
#   VLESSBENCH_LOAD_REQUESTS  requests per active session (200)
#   VLESSBENCH_LOAD_SECONDS   length of the SIGHUP-storm load run (300)
#   VLESSBENCH_LOAD_HOLD      seconds the idle sessions are held before release (120)
# Every round's output goes to soak-N.log in the current directory; FIGURE lines are the numbers.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
rounds="${2:-3}"
export VLESSBENCH_BIN="$(cd "$build" && pwd)/bin"
export VLESSBENCH_LOAD_IDLE="${VLESSBENCH_LOAD_IDLE:-10000}"
export VLESSBENCH_LOAD_ACTIVE="${VLESSBENCH_LOAD_ACTIVE:-2000}"
export VLESSBENCH_LOAD_REQUESTS="${VLESSBENCH_LOAD_REQUESTS:-200}"
export VLESSBENCH_LOAD_SECONDS="${VLESSBENCH_LOAD_SECONDS:-300}"
export VLESSBENCH_LOAD_HOLD="${VLESSBENCH_LOAD_HOLD:-120}"
status=0
for i in $(seq 1 "$rounds"); do
  log="soak-$i.log"
  echo "round $i/$rounds -> $log"
  if ! python3 "$here/../integration/test_load.py" >"$log" 2>&1 ||
     ! python3 "$here/../integration/test_faults.py" >>"$log" 2>&1; then
    echo "round $i FAILED (see $log)"
    status=1
  fi
  grep -h '^FIGURE\|^PASS\|^FAIL' "$log" || true
done
exit "$status"
