"""Where things are and how this run is set up: the repository, the binaries under test (the
environment variables ctest sets), the tools the tests drive, the loopback address."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # tests/integration
REPO = HERE.parent.parent
# Absolute: processes start in their own temp folders (VLESSBENCH_BIN=build/bin works too).
BIN = Path(os.environ.get("VLESSBENCH_BIN") or REPO / "build" / "bin").resolve()
# The client tools (the runner vlessbench, the load generator vlessbench_load): the Release tree's even
# when the daemon under test is a sanitizer build (ctest sets VLESSBENCH_CLIENT_BIN there). The
# sanitizer trees build the daemon, the unit tests and the fuzz targets only: the client code runs
# under ASan in the unit tests and fuzz targets, and the tools' own threads are test scaffolding.
CLIENT_BIN = Path(os.environ.get("VLESSBENCH_CLIENT_BIN") or BIN).resolve()
DAEMON = BIN / "vlessbenchd"
V2RAY = shutil.which("v2ray") or "/usr/bin/v2ray"
CURL = shutil.which("curl") or "/usr/bin/curl"

LOOPBACK = "127.0.0.1"
# Set by the sanitizer build's ctest entries: the daemon is several times slower there, so
# timing-sensitive checks skip themselves.
SANITIZED = bool(os.environ.get("VLESSBENCH_SANITIZED"))
# Set by the TSan tree's ctest entries: every daemon a test starts from a dict config runs
# [limits] threads = N, so VLESS sessions run on N io_context threads.
THREADS = int(os.environ.get("VLESSBENCH_TEST_THREADS") or 0)
