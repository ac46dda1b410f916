#!/usr/bin/env python3
"""The house format (.clang-format) on the files that are in it (ctest "lint: clang-format").

tests/format/formatted.txt lists the product sources at .clang-format's fixed point, one path a
line; `clang-format-14 --dry-run --Werror` must pass on each. The list grows as files are
formatted (a file joins it in the commit that formats it); a listed file that drifts fails here.
Files not listed are not checked: formatting the whole tree at once would be a diff no one reviews
and a merge conflict with every branch in flight.

Usage: check_format.py [ROOT]        check the listed files
       check_format.py --self-test   show the check fail: a listed file with its layout broken
Exit 77 (ctest: skipped) when clang-format-14 is not installed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def clang_format() -> str | None:
    return shutil.which("clang-format-14") or shutil.which("clang-format")


def listed(root: Path) -> list[str]:
    lines = (root / "tests" / "format" / "formatted.txt").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def unformatted(tool: str, root: Path, files: list[str]) -> list[str]:
    """The listed files clang-format would change (or that are missing), with its first complaint."""
    bad = []
    for f in files:
        path = root / f
        if not path.is_file():
            bad.append(f"{f}: listed in tests/format/formatted.txt but missing")
            continue
        r = subprocess.run([tool, f"--style=file:{root / '.clang-format'}", "--dry-run", "--Werror", str(path)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            first = next((l for l in r.stderr.splitlines() if "error:" in l), r.stderr.strip()[:200])
            bad.append(f"{f}: not in the house format ({first.strip()})")
    return bad


def self_test(tool: str, root: Path) -> int:
    files = listed(root)
    failures = []
    if not files:
        failures.append("tests/format/formatted.txt lists no file")
    else:
        tmp = Path(tempfile.mkdtemp(prefix="vlessbench-format-"))
        shutil.copy(root / ".clang-format", tmp / ".clang-format")
        src = (root / files[0]).read_text()
        good = tmp / "good" / files[0]
        good.parent.mkdir(parents=True)
        good.write_text(src)
        # The same file with one line indented by 4 spaces and a run of spaces inside another.
        lines = src.splitlines(keepends=True)
        i = next(n for n, l in enumerate(lines) if l.strip() and not l.startswith(("#", "//")))
        lines[i] = "    " + lines[i]
        bad = tmp / "bad" / files[0]
        bad.parent.mkdir(parents=True)
        bad.write_text("".join(lines))
        if unformatted(tool, tmp, [f"good/{files[0]}"]):
            failures.append(f"a formatted copy of {files[0]} was reported")
        if not unformatted(tool, tmp, [f"bad/{files[0]}"]):
            failures.append(f"a copy of {files[0]} with line {i + 1} re-indented was not reported")
        if not unformatted(tool, tmp, ["bad/no_such_file.cpp"]):
            failures.append("a missing listed file was not reported")
    for f in failures:
        print("FAIL", f)
    print(f"{3 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def main() -> int:
    tool = clang_format()
    if tool is None:
        print("clang-format not found (apt-get install clang-format-14): skipped")
        return 77
    args = sys.argv[1:]
    if args[:1] == ["--self-test"]:
        return self_test(tool, HERE.parents[1])
    root = Path(args[0]) if args else HERE.parents[1]
    files = listed(root)
    bad = unformatted(tool, root, files)
    for b in bad:
        print(b)
    print(f"clang-format: {len(files)} listed file(s), {len(bad)} not in the house format")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
