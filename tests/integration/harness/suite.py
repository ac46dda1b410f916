"""A tiny test runner: named checks, all run, failures listed, exit code for ctest; and the exit
hook that stops and checks every daemon of a script that ends without Suite.run()."""
from __future__ import annotations

import atexit
import os
import sys
import time
import traceback

from . import processes
from .checks import Skip
from .daemon import check_daemons


class Suite:
    def __init__(self, name: str):
        self.name = name
        self.tests = []

    def test(self, fn):
        self.tests.append(fn)
        return fn

    def run(self) -> None:
        """Runs the tests (all of them, or those named on the command line), then stops and checks
        every daemon (check_daemons: a sanitizer report or a bad exit is a failure), then cleans up.
        Exit status: 1 on any failure; 77 (ctest's skip) when every test that ran skipped; else 0."""
        only = set(sys.argv[1:])
        failed, skipped, passed = [], [], []
        t_all = time.monotonic()
        for fn in self.tests:
            if only and fn.__name__ not in only:
                continue
            t0 = time.monotonic()
            try:
                fn()
                passed.append(fn.__name__)
                print(f"PASS {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
            except Skip as e:
                skipped.append(fn.__name__)
                print(f"SKIP {self.name}: {fn.__name__}: {e}", flush=True)
            except Exception:  # noqa: BLE001 - report and continue with the next check
                failed.append(fn.__name__)
                print(f"FAIL {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
                traceback.print_exc()
                sys.stdout.flush()
        findings = check_daemons()
        failed += ["daemon check"] * len(findings)
        skip_note = f", {len(skipped)} skipped ({', '.join(skipped)})" if skipped else ""
        print(f"{self.name}: {len(failed)} failed{skip_note}; {time.monotonic() - t_all:.1f}s", flush=True)
        if failed:
            processes.keep_tmp()
        processes._cleanup()
        sys.exit(1 if failed else 77 if skipped and not passed else 0)


def _at_exit() -> None:
    # A script that ends without Suite.run() (an exception at module level, sys.exit) still has
    # its daemons stopped and checked; a finding makes the exit status 1.
    findings = check_daemons()
    if findings:
        processes.keep_tmp()
    processes._cleanup()
    if findings:
        sys.stdout.flush()
        os._exit(1)


atexit.register(_at_exit)
