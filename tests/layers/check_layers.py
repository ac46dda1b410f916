#!/usr/bin/env python3
"""The layering rules of DESIGN.md §5 as a check (ctest "lint: layers").

Data flows one way: core <- target <- server, and core <- runner. Every project include names its
folder ("core/config/config.hpp"), so which layer a header belongs to is visible where it is used:
- core/ includes nothing from server/, target/ or runner/;
- target/ includes nothing from server/ or runner/;
- runner/ includes nothing from server/ or target/;
- server/ includes nothing from runner/.

core/ itself is cut in sub-layers (core/README.md); no source file sits at its top level, and
each sub-folder may include only the ones listed in CORE_MAY_INCLUDE:
- wire/    pure codecs and format+parse pairs: no other core folder, no socket or TLS header, no
           Asio beyond address values, no logging (a parser never touches a socket);
- net/     sockets, TLS, socket policy, timers: wire/ only;
- config/  the config value and its TOML reader: wire/, net/ (the policy and TLS values it holds);
- log/     the access log, its events, the dashboard feed: wire/, net/, config/;
- client/  the one VLESS client: wire/ and net/ only (no config, no log, no daemon state);
- runtime/ state the daemon's parts share: any core folder but client/.

Usage: check_layers.py [ROOT]   (default: the repository this file is in). Prints one line per
violation, FILE:LINE: reason, and exits 1 if there is any.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

LAYERS = ("core", "server", "target", "runner")
# What each layer must not include.
FORBIDDEN = {
    "core": {"server", "target", "runner"},
    "target": {"server", "runner"},
    "runner": {"server", "target"},
    "server": {"runner"},
}
CORE_MAY_INCLUDE = {
    "wire": {"wire"},
    "net": {"wire", "net"},
    "config": {"wire", "net", "config"},
    "log": {"wire", "net", "config", "log"},
    "client": {"wire", "net", "client"},
    "runtime": {"wire", "net", "config", "log", "runtime"},
}
# System and library headers a wire codec must not include: sockets, TLS sessions, the event loop
# (Asio beyond address values) and logging. Hashes and random bytes (openssl/sha.h, rand.h) are fine.
WIRE_FORBIDDEN_SYSTEM = re.compile(
    r"^(sys/socket\.h|netinet/|arpa/inet\.h|unistd\.h|poll\.h|sys/epoll\.h|openssl/ssl\.h|spdlog/|"
    r"asio\.hpp$|asio/(?!ip/address|ip/tcp\.hpp|ip/udp\.hpp))")
# Folders whose sources are checked: the layers, and the code that uses them (which may include
# any layer, but must name it).
CHECKED = LAYERS + ("bench", "tests")
SOURCE = {".cpp", ".hpp", ".h", ".cc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')


def layer_of(path: Path, root: Path) -> str | None:
    top = path.relative_to(root).parts[0]
    return top if top in LAYERS else None


def core_part(rel_parts: tuple[str, ...]) -> str | None:
    """The core sub-folder of a path inside core/ ("wire" for core/wire/x.hpp), "" at core/'s top."""
    if len(rel_parts) < 2 or rel_parts[0] != "core":
        return None
    return rel_parts[1] if len(rel_parts) > 2 else ""


def violations(root: Path) -> list[str]:
    out = []
    for folder in CHECKED:
        base = root / folder
        if not base.is_dir():
            continue
        for f in sorted(base.rglob("*")):
            if f.suffix not in SOURCE or not f.is_file():
                continue
            rel = f.relative_to(root)
            mine = layer_of(f, root)
            part = core_part(rel.parts)
            if part == "":
                out.append(f"{rel}:1: a source file at core/'s top level: it belongs in one of core/"
                           f"{{{','.join(CORE_MAY_INCLUDE)}}}/")
            elif part is not None and part not in CORE_MAY_INCLUDE:
                out.append(f"{rel}:1: core/{part}/ is not a known core sub-layer (check_layers.py CORE_MAY_INCLUDE)")
                part = None
            for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                sm = SYSTEM_INCLUDE.match(line)
                if sm:
                    if part == "wire" and WIRE_FORBIDDEN_SYSTEM.match(sm.group(1)):
                        out.append(f"{rel}:{no}: core/wire/ must not include <{sm.group(1)}>: wire codecs are pure "
                                   f"(no sockets, TLS sessions, event loop or logging)")
                    continue
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                first = inc.split("/", 1)[0]
                if first in LAYERS:
                    if not (root / inc).is_file():
                        out.append(f"{rel}:{no}: includes \"{inc}\", which does not exist")
                    elif mine and first in FORBIDDEN[mine]:
                        out.append(f"{rel}:{no}: {mine}/ must not include {first}/ (\"{inc}\"): "
                                   f"data flows core <- target <- server, core <- runner")
                    elif part:
                        theirs = core_part(tuple(inc.split("/")))
                        if theirs and theirs not in CORE_MAY_INCLUDE[part]:
                            out.append(f"{rel}:{no}: core/{part}/ must not include core/{theirs}/ (\"{inc}\"): "
                                       f"core/{part}/ may include core/{{{','.join(sorted(CORE_MAY_INCLUDE[part]))}}}/")
                    continue
                # Not a layer path: a project header named without its folder is the mistake the
                # rule exists for; anything else (a test's local helper) must sit beside the file or,
                # outside the layers, in a folder above it (tests/unit/bytes.hpp for
                # tests/unit/core/wire/test_x.cpp: tests/unit mirrors the source folders).
                owners = [str(p.relative_to(root)) for layer in LAYERS for p in (root / layer).rglob(inc)
                          if p.is_file() and str(p.relative_to(root / layer)) .endswith(inc)][:1]
                above = [f.parent] if mine else [d for d in f.parents if root in d.parents]
                if owners:
                    out.append(f"{rel}:{no}: #include \"{inc}\" must name its folder (\"{owners[0]}\")")
                elif not any((d / inc).is_file() for d in above):
                    out.append(f"{rel}:{no}: #include \"{inc}\" is neither a layer header nor beside {rel.name}"
                               f"{'' if mine else ' or in a folder above it'}")
    return out


def main() -> int:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    found = violations(root)
    for v in found:
        print(v)
    print(f"check_layers: {len(found)} violation(s) in {root}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
