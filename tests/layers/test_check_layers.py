#!/usr/bin/env python3
"""The layering check can fail: a tree with each kind of forbidden include is reported, line by
line, and a clean tree passes (ctest "lint: layers self-test")."""
from __future__ import annotations

import tempfile
from pathlib import Path

from check_layers import CORE_MAY_INCLUDE, violations


def tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="vlessbench-layers-"))
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


SUBS = tuple(CORE_MAY_INCLUDE)
BASE = {f"core/{s}/{s}.hpp": "#pragma once\n" for s in SUBS} | {
    "server/s.hpp": "#pragma once\n",
    "target/t.hpp": "#pragma once\n",
    "runner/r.hpp": "#pragma once\n",
}


def includes(*paths: str) -> str:
    return "".join(f'#include "{p}"\n' for p in paths)


def main() -> int:
    clean_files = {f"core/{s}/{s}.cpp": includes(*(f"core/{o}/{o}.hpp" for o in sorted(CORE_MAY_INCLUDE[s])))
                   for s in SUBS}
    clean_files["core/wire/wire.cpp"] += "#include <asio/ip/address.hpp>\n#include <openssl/sha.h>\n#include <vector>\n"
    clean = tree(BASE | clean_files | {
        "target/t.cpp": '#include "target/t.hpp"\n#include "core/wire/wire.hpp"\n',
        "server/s.cpp": '#include "server/s.hpp"\n#include "target/t.hpp"\n#include "core/runtime/runtime.hpp"\n',
        "runner/r.cpp": '#include "runner/r.hpp"\n#include "core/client/client.hpp"\n',
        "tests/unit/x.cpp": '#include "server/s.hpp"\n#include "helper.hpp"\n',
        "tests/unit/helper.hpp": "#pragma once\n",
        "tests/unit/core/wire/y.cpp": '#include "core/wire/wire.hpp"\n#include "helper.hpp"\n',  # helper above it
    })
    bad_files = {
        "core/a.cpp": '#include "core/wire/wire.hpp"\n',                # a file at core/'s top level
        "core/misc/m.cpp": "\n",                                         # an unknown sub-layer
        "core/wire/b.cpp": '#include "wire.hpp"\n',                      # no folder
        "core/wire/c.cpp": "#include <sys/socket.h>\n",                  # a socket in a codec
        "core/wire/d.cpp": "#include <asio/ip/tcp.hpp>\n#include <asio/steady_timer.hpp>\n",  # event loop
        "core/wire/e.cpp": "#include <spdlog/spdlog.h>\n",               # logging in a codec
        "core/runtime/x.cpp": '#include "server/s.hpp"\n',              # core -> server
        "target/t.cpp": '#include "core/wire/wire.hpp"\n#include "server/s.hpp"\n',  # target -> server
        "runner/r.cpp": '#include "target/t.hpp"\n',                    # runner -> target
        "server/s.cpp": '#include "runner/r.hpp"\n',                    # server -> runner
        "server/x.cpp": '#include "core/wire/nope.hpp"\n',              # missing
        "tests/unit/core/z.cpp": '#include "nowhere.hpp"\n',           # a helper that is nowhere
    }
    expected = ["core/a.cpp:1: a source file at core/'s top level", "core/misc/m.cpp:1: core/misc/ is not a known",
                "core/wire/b.cpp:1: #include \"wire.hpp\" must name its folder",
                "core/wire/c.cpp:1: core/wire/ must not include <sys/socket.h>",
                "core/wire/d.cpp:2: core/wire/ must not include <asio/steady_timer.hpp>",
                "core/wire/e.cpp:1: core/wire/ must not include <spdlog/spdlog.h>",
                "core/runtime/x.cpp:1: core/ must not include server/",
                "target/t.cpp:2: target/ must not include server/", "runner/r.cpp:1: runner/ must not include target/",
                "server/s.cpp:1: server/ must not include runner/", "server/x.cpp:1: includes \"core/wire/nope.hpp\"",
                "tests/unit/core/z.cpp:1: #include \"nowhere.hpp\" is neither a layer header nor beside"]
    # Every sub-layer's rule fires: each includes the first other core folder it may not.
    for s in SUBS:
        no = [o for o in SUBS if o not in CORE_MAY_INCLUDE[s]]
        if no:
            bad_files[f"core/{s}/bad.cpp"] = includes(f"core/{no[0]}/{no[0]}.hpp")
            expected.append(f"core/{s}/bad.cpp:1: core/{s}/ must not include core/{no[0]}/")
    bad = tree(BASE | bad_files)
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
