"""Markdown tables in the docs render whole: a blank line between two table rows ends the table,
and the rows after it show as plain text (issue 30 item 8, docs/runner.md's `tun` and `udp://`
rows). And the test map cannot go stale: every tests/integration/test_*.py has a row in the table
of tests/integration/README.md (its first cell names the file in backticks).
Usage: check_tables.py REPO; exits 1 naming each file:line or missing row, 0 when all is well.
The self-test (run first, every time) shows each check failing on a broken example."""
import re
import sys
import tempfile
from pathlib import Path


def broken_tables(text: str) -> list[int]:
    """1-based line numbers of blank lines between two table rows, outside code fences."""
    lines = text.split("\n")
    fenced = False
    out = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.strip() or i == 0 or i + 1 >= len(lines):
            continue
        if lines[i - 1].lstrip().startswith("|") and lines[i + 1].lstrip().startswith("|"):
            out.append(i + 1)
    return out


def scripts_without_row(integration: Path) -> list[str]:
    """The test_*.py files of a tests/integration folder that no row of its README.md table names
    in its first cell."""
    named = set()
    for line in (integration / "README.md").read_text().split("\n"):
        cells = line.strip().split("|")
        if line.lstrip().startswith("|") and len(cells) > 2:
            named.update(re.findall(r"`(test_\w+\.py)`", cells[1]))
    return [f.name for f in sorted(integration.glob("test_*.py")) if f.name not in named]


def self_test() -> None:
    assert broken_tables("| a |\n|---|\n| 1 |\n\n| 2 |\n") == [4], "the check misses a split table"
    assert broken_tables("| a |\n|---|\n| 1 |\n\ntext\n\n| b |\n") == [], "the check flags two tables"
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for name in ("test_a.py", "test_b.py", "test_c.py", "helper.py"):
            (folder / name).write_text("")
        # test_b.py is named in a second cell and in prose only, test_c.py nowhere: both missing.
        (folder / "README.md").write_text("| file | what |\n|---|---|\n| `test_a.py` | a, like `test_b.py` |\n\n"
                                          "`test_b.py` in prose\n")
        assert scripts_without_row(folder) == ["test_b.py", "test_c.py"], "the check misses a script without a row"
        (folder / "README.md").write_text("| file | what |\n|---|---|\n| `test_a.py`, `test_b.py` | x |\n"
                                          "| `test_c.py` | y |\n")
        assert scripts_without_row(folder) == [], "the check flags scripts that have rows"


def main() -> int:
    repo = Path(sys.argv[1])
    self_test()
    failures = [f"{f.relative_to(repo)}:{n}: blank line inside a table (the rows after it do not render)"
                for f in sorted([repo / "README.md", *(repo / "docs").glob("*.md"), *(repo / "tests").rglob("*.md")])
                for n in broken_tables(f.read_text())]
    integration = repo / "tests" / "integration"
    failures += [f"tests/integration/{name}: no row in tests/integration/README.md's table (add one: the file in "
                 f"backticks, then what it covers)" for name in scripts_without_row(integration)]
    print("\n".join(failures) or "every table whole, every integration script in its README table")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
