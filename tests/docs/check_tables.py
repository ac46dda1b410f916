"""Markdown tables in the docs render whole: a blank line between two table rows ends the table,
and the rows after it show as plain text (issue 30 item 8, docs/runner.md's `tun` and `udp://`
rows). Usage: check_tables.py REPO; exits 1 naming each file:line, 0 when every table is whole."""
import sys
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


def main() -> int:
    repo = Path(sys.argv[1])
    assert broken_tables("| a |\n|---|\n| 1 |\n\n| 2 |\n") == [4], "the check misses a split table"
    assert broken_tables("| a |\n|---|\n| 1 |\n\ntext\n\n| b |\n") == [], "the check flags two tables"
    failures = [f"{f.relative_to(repo)}:{n}: blank line inside a table (the rows after it do not render)"
                for f in sorted([repo / "README.md", *(repo / "docs").glob("*.md"), *(repo / "tests").rglob("*.md")])
                for n in broken_tables(f.read_text())]
    print("\n".join(failures) or "every table whole")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
