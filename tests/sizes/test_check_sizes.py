#!/usr/bin/env python3
"""The file-size check can fail: a tree with a file of each kind over the limits is reported, and a
clean tree passes; the same for functions over the function limits, found past the C++ that could
mislead a brace scan (ctest "lint: file sizes self-test")."""
from __future__ import annotations

import tempfile
from pathlib import Path

from check_sizes import FUNCTION_LIMIT, FUNCTION_SOFT_LIMIT, HEAD, LIMIT, MIN_REASON, SOFT_LIMIT, violations
from cpp_functions import functions


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


def fn(head: str, n: int, body: str = "  x();") -> str:
    """A function of n lines: `head {`, body lines, `}`."""
    return "\n".join([head + " {"] + [body] * (n - 2) + ["}"]) + "\n"


# What a brace scan must not take for a brace: literals, comments, an #else branch, a default argument.
TRICKS = """namespace a {
// a comment with a brace {
/* and { another */
const char* s = "{ in a string";
const char c = '{';
const char* raw = R"x({ in a raw string ")x";
#if defined(ONE)
void f() {
#else
void f() { {
#endif
}
struct holder {
  int x_{0};
  holder(int x) : x_{x} {}
  void g(std::string_view s = {},
         int n = {}) const noexcept {
    auto l = [&] { return s; };
    int big[1'000] = {n}; char close = '}';
  }
};
}  // namespace a
"""

SHORT = "// size: " + "x" * MIN_REASON
SOFT, HARD = FUNCTION_SOFT_LIMIT, FUNCTION_LIMIT
FUNCTIONS_CLEAN = {
    "core/f_at_soft.cpp": fn("void f()", SOFT),
    "core/f_reasoned.cpp": SHORT + "\n// and more words\n" + fn("void f()", SOFT + 1),
    "server/f_lambda.hpp": "struct s {\n" + fn("  void f()", SOFT, "  auto l = [] { return 1; };") + "};\n",
    "target/f_class.cpp": "class big {\n" + "".join(fn(f"  int m{i}() const", 10) for i in range(30)) + "};\n",
    "runner/f_at_hard.cpp": REASON + "\n" + fn("auto run(int argc) -> int", HARD),
    "core/f_tricks.cpp": TRICKS,
}
FUNCTIONS_BAD = {
    # its template line makes it HARD + 1 lines: a reason does not help past the limit
    "core/f_hard.cpp": REASON + "\n" + fn("template <class T>\nasio::awaitable<void> pump(T& t)", HARD),
    "server/f_soft.cpp": "namespace n {\n" + fn("void session::run()", SOFT + 1) + "}\n",
    "target/f_short.cpp": "// size: big\n" + fn("int f()", SOFT + 1),
    "runner/f_gap.cpp": REASON + "\n\n" + fn("int f()", SOFT + 1),  # a blank line: not just above
    "core/f_ctor.cpp": fn("thing::thing(int a) : a_{a}, b_(a)", SOFT + 1),
    "server/f_lambdas.cpp": fn("void f()", SOFT - 2) + fn("void g()", SOFT + 1, "  [] { };"),
}
FUNCTIONS_EXPECTED = [
    f"core/f_hard.cpp:2: function pump is {HARD + 1} lines, over the limit of {HARD}",
    f"server/f_soft.cpp:2: function session::run is {SOFT + 1} lines, over {SOFT} without",
    f"target/f_short.cpp:2: function f is {SOFT + 1} lines, its '// size:' reason is under",
    f"runner/f_gap.cpp:3: function f is {SOFT + 1} lines, over {SOFT} without",
    f"core/f_ctor.cpp:1: function thing::thing is {SOFT + 1} lines, over {SOFT} without",
    f"server/f_lambdas.cpp:{SOFT - 1}: function g is {SOFT + 1} lines, over {SOFT} without",
]


def check_functions() -> list[str]:
    failures = []
    got = violations(tree(FUNCTIONS_CLEAN))
    if got:
        failures.append(f"clean functions reported: {got}")
    found = [(f.name, f.head_line, f.close_line) for f in functions(TRICKS)]
    if found != [("f", 8, 12), ("holder", 15, 15), ("g", 16, 20)]:
        failures.append(f"functions in the tricky file: {found}")
    got = violations(tree(FUNCTIONS_BAD))
    for e in FUNCTIONS_EXPECTED:
        if not any(g.startswith(e) for g in got):
            failures.append(f"not reported: {e}")
    if len(got) != len(FUNCTIONS_EXPECTED):
        failures.append(f"{len(got)} function violations reported, {len(FUNCTIONS_EXPECTED)} expected: {got}")
    return failures


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
    failures += check_functions()
    for f in failures:
        print("FAIL", f)
    total = len(expected) + 1 + len(FUNCTIONS_EXPECTED) + 2
    print(f"{total - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
