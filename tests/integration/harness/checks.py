"""What a test asserts with, and how it skips."""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

class Skip(Exception):
    """raise Skip("reason") in a test: reported as "SKIP name: reason", neither pass nor fail."""


def skip_file(reason: str) -> None:
    """The whole file skips: "SKIP <file>: (every case): reason", exit 77 (ctest's skip)."""
    print(f"SKIP {Path(sys.argv[0]).stem}: (every case): {reason}", flush=True)
    sys.exit(77)


def median_ms(samples) -> float:
    return statistics.median(samples) * 1000.0


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)
