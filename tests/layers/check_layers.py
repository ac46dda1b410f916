#!/usr/bin/env python3
"""The layering rules of DESIGN.md §5 as a check (ctest "lint: layers").

Data flows one way: core <- target <- server, and core <- runner. Every project include names its
folder ("core/config.hpp"), so which layer a header belongs to is visible where it is used, and:
- core/ includes nothing from server/, target/ or runner/;
- target/ includes nothing from server/ or runner/;
- runner/ includes nothing from server/ or target/;
- server/ includes nothing from runner/.

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
# Folders whose sources are checked: the layers, and the code that uses them (which may include
# any layer, but must name it).
CHECKED = LAYERS + ("bench", "tests")
SOURCE = {".cpp", ".hpp", ".h", ".cc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path: Path, root: Path) -> str | None:
    top = path.relative_to(root).parts[0]
    return top if top in LAYERS else None


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
            for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
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
                    continue
                # Not a layer path: a project header named without its folder is the mistake the
                # rule exists for; anything else (a test's local helper) must sit beside the file.
                owners = [layer for layer in LAYERS if (root / layer / inc).is_file()]
                if owners:
                    out.append(f"{rel}:{no}: #include \"{inc}\" must name its folder "
                               f"(\"{owners[0]}/{inc}\")")
                elif not (f.parent / inc).is_file():
                    out.append(f"{rel}:{no}: #include \"{inc}\" is neither a layer header nor beside {rel.name}")
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
