#!/usr/bin/env python3
"""The file-size check can fail: a tree with a file of each kind over the limits is reported, and a
clean tree passes (ctest "lint: file sizes self-test")."""
from __future__ import annotations

import tempfile
from pathlib import Path

from check_sizes import HEAD, LIMIT, MIN_REASON, SOFT_LIMIT, violations


def tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="vlessbench-sizes-"))
    for layer in ("core", "server", "target", "runner"):
        (root / layer).mkdir()
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def lines(n: int, head: str = "") -> str:
    body = [head] if head else []
    return "\n".join(body + [f"int x{i};" for i in range(n - len(body))]) + "\n"


REASON = "// size: the reader, the writer and the table share one state"


def main() -> int:
    clean = tree({
        "core/wire/small.cpp": lines(SOFT_LIMIT),                     # at the soft limit
        "server/stated.hpp": lines(LIMIT, REASON),                    # at the limit, with a reason
        "runner/r.cpp": lines(SOFT_LIMIT + 1, "// size: " + "x" * MIN_REASON),
        "target/notes.md": lines(LIMIT + 100),                        # not a source file
        "tests/unit/big_test.cpp": lines(LIMIT + 100),                # not a product file
    })
    late = "\n" * HEAD + REASON + "\n"  # the reason past the head does not count
    bad = tree({
        "core/net/over.cpp": lines(LIMIT + 1, REASON),               # over the limit, reason or not
        "server/silent.hpp": lines(SOFT_LIMIT + 1),                  # over the soft limit, no reason
        "target/short.cpp": lines(SOFT_LIMIT + 1, "// size: big"),   # a reason too short
        "runner/late.cpp": late + lines(SOFT_LIMIT),                 # the reason too far down
        "core/wire/x.h": lines(SOFT_LIMIT + 1, "// sizes: typo form of the comment, not counted"),
    })
    expected = ["core/net/over.cpp: 701 lines, over the limit of 700",
                "server/silent.hpp: 601 lines, over 600 without",
                "target/short.cpp: 601 lines, its '// size:' reason is under",
                f"runner/late.cpp: {HEAD + 1 + SOFT_LIMIT} lines, over 600 without",
                "core/wire/x.h: 601 lines, over 600 without"]
    failures = []
    if violations(clean):
        failures.append(f"clean tree reported: {violations(clean)}")
    got = violations(bad)
    for e in expected:
        if not any(g.startswith(e) for g in got):
            failures.append(f"not reported: {e}")
    if len(got) != len(expected):
        failures.append(f"{len(got)} violations reported, {len(expected)} expected: {got}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(expected) + 1 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
