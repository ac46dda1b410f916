#!/usr/bin/env python3
"""The layering check can fail: a tree with each kind of forbidden include is reported, line by
line, and a clean tree passes (ctest "lint: layers self-test")."""
from __future__ import annotations

import tempfile
from pathlib import Path

from check_layers import violations


def tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="vlessbench-layers-"))
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


BASE = {
    "core/a.hpp": "#pragma once\n",
    "server/s.hpp": "#pragma once\n",
    "target/t.hpp": "#pragma once\n",
    "runner/r.hpp": "#pragma once\n",
}


def main() -> int:
    clean = tree(BASE | {
        "core/a.cpp": '#include "core/a.hpp"\n#include <vector>\n',
        "target/t.cpp": '#include "target/t.hpp"\n#include "core/a.hpp"\n',
        "server/s.cpp": '#include "server/s.hpp"\n#include "target/t.hpp"\n#include "core/a.hpp"\n',
        "runner/r.cpp": '#include "runner/r.hpp"\n#include "core/a.hpp"\n',
        "tests/unit/x.cpp": '#include "server/s.hpp"\n#include "helper.hpp"\n',
        "tests/unit/helper.hpp": "#pragma once\n",
    })
    bad = tree(BASE | {
        "core/a.cpp": '#include "server/s.hpp"\n',                 # core -> server
        "core/b.cpp": '#include "a.hpp"\n',                        # no folder
        "target/t.cpp": '#include "core/a.hpp"\n#include "server/s.hpp"\n',  # target -> server
        "runner/r.cpp": '#include "target/t.hpp"\n',               # runner -> target
        "server/s.cpp": '#include "runner/r.hpp"\n',               # server -> runner
        "server/x.cpp": '#include "core/nope.hpp"\n',              # missing
    })
    failures = []
    if violations(clean):
        failures.append(f"clean tree reported: {violations(clean)}")
    got = violations(bad)
    expected = ["core/a.cpp:1: core/ must not include server/", "core/b.cpp:1: #include \"a.hpp\" must name its folder",
                "target/t.cpp:2: target/ must not include server/", "runner/r.cpp:1: runner/ must not include target/",
                "server/s.cpp:1: server/ must not include runner/", "server/x.cpp:1: includes \"core/nope.hpp\""]
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
