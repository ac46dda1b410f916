#!/usr/bin/env python3
"""lint: unit test names. ctest runs each Catch2 TEST_CASE by its name (catch_discover_tests), so a
name must survive that trip: no ';' (CMake splits the test in two halves that select nothing) and
no leading '-' (Catch reads it as an option). A leading '[' is escaped by catch_discover_tests and
runs. Exit 1 naming each offender."""
import pathlib
import re
import sys

here = pathlib.Path(__file__).resolve().parent
bad = []
for f in sorted(here.rglob("*.cpp")):
    for n, line in enumerate(f.read_text().splitlines(), 1):
        m = re.search(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"', line)
        if m and (";" in m.group(1) or m.group(1)[:1] == "-"):
            bad.append(f"{f.relative_to(here)}:{n}: {m.group(1)!r}")
for b in bad:
    print(b)
print(f"unit test names: {len(bad)} that ctest cannot run by name")
sys.exit(1 if bad else 0)
