#!/usr/bin/env python3
"""The house format (.clang-format) on every C++ source (ctest "lint: clang-format").

Every C++ file of the checkout (.cpp, .hpp, .h: `git ls-files`, or a walk of the tree outside the
build folders when there is no git) must be at .clang-format's fixed point:
`clang-format-14 --dry-run --Werror` passes on it. A file that drifts, or a new file written in
another layout, fails here with clang-format's first complaint about it; `tools/format.sh` puts the
tree back at the fixed point.

Usage: check_format.py [ROOT]        check the tree
       check_format.py --self-test   show the check fail: a file with its layout broken, found by
                                     the same discovery as the real run
Exit 77 (ctest: skipped) when clang-format-14 is not installed.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUFFIXES = (".cpp", ".hpp", ".h")
# A walk without git leaves out what is not source: build trees, the package's staging folder.
SKIPPED_DIRS = re.compile(r"^(build[^/]*|\.git|debian/tmp|obj-[^/]*)(/|$)")
BATCH = 64  # files per clang-format process: one process a file would cost a second a hundred files


def clang_format() -> str | None:
    return shutil.which("clang-format-14") or shutil.which("clang-format")


def sources(root: Path) -> list[str]:
    """The C++ files of the checkout, relative to root."""
    r = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        names = [n for n in r.stdout.split("\0") if n]
    else:
        names = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        names = [n for n in names if not SKIPPED_DIRS.match(n)]
    return sorted(n for n in names if n.endswith(SUFFIXES) and (root / n).is_file())


def unformatted(tool: str, root: Path, files: list[str]) -> list[str]:
    """The files clang-format would change, each with its first complaint."""
    bad: dict[str, str] = {}
    for i in range(0, len(files), BATCH):
        batch = files[i:i + BATCH]
        r = subprocess.run([tool, f"--style=file:{root / '.clang-format'}", "--dry-run", "--Werror", *batch],
                           capture_output=True, text=True, cwd=root)
        if r.returncode == 0:
            continue
        for line in r.stderr.splitlines():
            m = re.match(r"^(.+?):\d+:\d+: error:", line)
            if m and m.group(1) in batch:
                bad.setdefault(m.group(1), line.strip())
        if not bad.keys() & set(batch):  # it failed without naming a file: report the batch's reason
            bad[batch[0]] = r.stderr.strip()[:200] or f"clang-format exited {r.returncode}"
    return [f"{f}: not in the house format ({why})" for f, why in sorted(bad.items())]


def self_test(tool: str, root: Path) -> int:
    files = sources(root)
    failures = []
    expect = ["core/", "server/", "target/", "runner/", "tests/unit/", "tests/fuzz/", "bench/load/"]
    for folder in expect:
        if not any(f.startswith(folder) for f in files):
            failures.append(f"no file under {folder} was found to check")
    sample = next((f for f in files if f.startswith("runner/") and f.endswith(".cpp")), None)
    if sample is None:
        failures.append("no runner/*.cpp to copy")
    else:
        # A tree of its own (no git: the walk), with a formatted copy of one file and a copy whose
        # first code line is re-indented by 4 spaces, plus one build folder the walk must skip.
        tmp = Path(tempfile.mkdtemp(prefix="vlessbench-format-"))
        shutil.copy(root / ".clang-format", tmp / ".clang-format")
        src = (root / sample).read_text()
        lines = src.splitlines(keepends=True)
        i = next(n for n, l in enumerate(lines) if l.strip() and not l.startswith(("#", "//")))
        broken = lines.copy()
        broken[i] = "    " + broken[i]
        for rel, text in [("good/a.cpp", src), ("bad/b.hpp", "".join(broken)), ("build/c.cpp", "".join(broken))]:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text)
        found = sources(tmp)
        if found != ["bad/b.hpp", "good/a.cpp"]:
            failures.append(f"the walk of a tree without git found {found}, not bad/b.hpp and good/a.cpp")
        report = unformatted(tool, tmp, found)
        if any(r.startswith("good/") for r in report):
            failures.append(f"a formatted copy of {sample} was reported")
        if not any(r.startswith("bad/b.hpp") for r in report):
            failures.append(f"a copy of {sample} with line {i + 1} re-indented was not reported")
        shutil.rmtree(tmp)
    for f in failures:
        print("FAIL", f)
    total = len(expect) + 4
    print(f"{total - len(failures)} passed, {len(failures)} failed")
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
    files = sources(root)
    bad = unformatted(tool, root, files)
    for b in bad:
        print(b)
    print(f"clang-format: {len(files)} file(s), {len(bad)} not in the house format")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
