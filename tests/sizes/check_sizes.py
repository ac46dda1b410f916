#!/usr/bin/env python3
"""The file-size rule (issue 24; STYLE.md "one idea, one place") as a check (ctest "lint: file sizes").

A product source file (core/ server/ target/ runner/: .cpp, .hpp, .h) is at most LIMIT lines; over
SOFT_LIMIT only when it says why, in a comment of the fixed form

    // size: REASON

among its first HEAD lines, REASON at least MIN_REASON characters (what the file's parts share
that a split would have to pass around). A file that grows past the limit is cut where it reads
well, or says why it is not.

The same for a function (STYLE.md, "short procedures"): a function definition in a product file is at
most FUNCTION_LIMIT lines, from its declaration's first line to its body's closing brace (a lambda
inside it counts toward it); over FUNCTION_SOFT_LIMIT only with a `// size: REASON` comment in the
comment lines just above it, REASON at least MIN_REASON characters. cpp_functions.py finds the
definitions (a brace scan that skips comments and literals).

Usage: check_sizes.py [ROOT]   (default: the repository this file is in). Prints one line per
violation, FILE: reason, and exits 1 if there is any.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from cpp_functions import functions

LAYERS = ("core", "server", "target", "runner")
SUFFIXES = (".cpp", ".hpp", ".h")
LIMIT = 700
SOFT_LIMIT = 600
HEAD = 40
MIN_REASON = 20
FUNCTION_LIMIT = 120
FUNCTION_SOFT_LIMIT = 80
REASON = re.compile(r"^\s*// size: (.*\S)\s*$")


def stated_reason(lines: list[str]) -> str | None:
    for line in lines[:HEAD]:
        m = REASON.match(line)
        if m:
            return m.group(1)
    return None


def reason_above(lines: list[str], first: int) -> str | None:
    """The `// size:` reason among the comment lines just above line `first` (1-based)."""
    i = first - 2
    while i >= 0 and lines[i].lstrip().startswith("//"):
        m = REASON.match(lines[i])
        if m:
            return m.group(1)
        i -= 1
    return None


def function_violations(rel: str, text: str) -> list[str]:
    out = []
    lines = text.splitlines()
    for f in functions(text):
        where, n = f"{rel}:{f.head_line}: function {f.name}", f.length
        if n > FUNCTION_LIMIT:
            out.append(f"{where} is {n} lines, over the limit of {FUNCTION_LIMIT}: cut it into named steps")
        elif n > FUNCTION_SOFT_LIMIT:
            reason = reason_above(lines, f.head_line)
            if reason is None:
                out.append(f"{where} is {n} lines, over {FUNCTION_SOFT_LIMIT} without a '// size: REASON' "
                           f"comment just above it")
            elif len(reason) < MIN_REASON:
                out.append(f"{where} is {n} lines, its '// size:' reason is under {MIN_REASON} characters")
    return out


def violations(root: Path) -> list[str]:
    out = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES:
                continue
            text = path.read_text(errors="replace")
            lines = text.splitlines()
            rel = path.relative_to(root).as_posix()
            out += function_violations(rel, text)
            n = len(lines)
            if n > LIMIT:
                out.append(f"{rel}: {n} lines, over the limit of {LIMIT}: split it")
            elif n > SOFT_LIMIT:
                reason = stated_reason(lines)
                if reason is None:
                    out.append(f"{rel}: {n} lines, over {SOFT_LIMIT} without a '// size: REASON' comment "
                               f"in its first {HEAD} lines")
                elif len(reason) < MIN_REASON:
                    out.append(f"{rel}: {n} lines, its '// size:' reason is under {MIN_REASON} characters")
    return out


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    if not all((root / layer).is_dir() for layer in LAYERS):
        print(f"{root}: not a vlessbench tree (no {', '.join(LAYERS)})")
        return 1
    found = violations(root)
    for v in found:
        print(v)
    print(f"file sizes: {len(found)} violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
