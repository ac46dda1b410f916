"""Function definitions in C++ source, found without a compiler (for the function-length rule).

`functions(text)` returns every function definition whose body is not inside another function's body:
its name, the line its declaration starts on and the lines of its body's braces (1-based). A lambda,
a local class or a block inside a function counts toward that function; a namespace, class, struct,
union, enum or `extern "C"` body is a scope whose functions are found in turn; an initializer's braces
(`int x{1};`, `= {...}`, a constructor's member initializers) are no function.

How: `blank()` replaces comments, string, character and raw-string literals and the branches after a
preprocessor `#else`/`#elif` by spaces (keeping every newline, so line numbers hold), then a brace
scan looks, at each `{` outside a function, at the text since the last `;`, `{` or `}` of its scope
(the head) to tell what the brace opens.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SCOPE_KEYWORD = re.compile(r"\b(namespace|class|struct|union|enum)\b")
ACCESS_LABEL = re.compile(r"\b(public|private|protected)\s*:(?!:)")
# What may stand between a function's parameter list and its body, once parenthesised parts are out:
# qualifiers, a trailing return type, a requires clause, a constructor's member initializers.
BETWEEN = re.compile(r"[\sA-Za-z0-9_:<>,*&\-{}]*")


@dataclass
class Function:
    name: str
    head_line: int   # where its declaration (template line included) starts
    open_line: int   # its body's `{`
    close_line: int  # its body's `}`

    @property
    def length(self) -> int:
        return self.close_line - self.head_line + 1


def _raw_string_end(text: str, i: int) -> int | None:
    """If a raw string literal's `R"` starts at i, the index just past its closing quote."""
    m = re.compile(r'R"([^ ()\\\t\n]{0,16})\(').match(text, i)
    if not m:
        return None
    end = text.find(")" + m.group(1) + '"', m.end())
    return len(text) if end < 0 else end + len(m.group(1)) + 2


def _quoted_end(text: str, i: int) -> int:
    """The index just past the literal opened by the quote at i (escapes honoured, ends at a newline)."""
    quote, j = text[i], i + 1
    while j < len(text) and text[j] != quote and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, len(text))


def _is_digit_separator(text: str, i: int) -> bool:
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_."):
        j -= 1
    return j < i and text[j].isdigit()


def _blank_literals(text: str) -> str:
    out, i, n = [], 0, len(text)
    keep = lambda s: re.sub(r"[^\n]", " ", s)  # noqa: E731
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif c == "R" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_") or text[i - 1] in "uUL8") \
                and _raw_string_end(text, i) is not None:
            end = _raw_string_end(text, i)
        elif c == '"' or (c == "'" and not _is_digit_separator(text, i)):
            end = _quoted_end(text, i)
        else:
            out.append(c)
            i += 1
            continue
        out.append(keep(text[i:end]))
        i = end
    return "".join(out)


def _blank_other_branches(text: str) -> str:
    """Keeps the first branch of every #if (and the directives' lines blank): braces stay balanced."""
    out, skipping = [], []  # skipping: per open #if, whether its current branch is dropped
    continued = False
    for line in text.split("\n"):
        d = re.match(r"\s*#\s*(\w+)", line)
        word = d.group(1) if d else ""
        directive, continued = bool(d) or continued, (bool(d) or continued) and line.rstrip().endswith("\\")
        if word in ("if", "ifdef", "ifndef"):
            skipping.append(False)
        elif word in ("else", "elif") and skipping:
            skipping[-1] = True
        elif word == "endif" and skipping:
            skipping.pop()
        dropped = directive or any(skipping)
        out.append("" if dropped else line)
    return "\n".join(out)


def blank(text: str) -> str:
    """The text with literals, comments, directives and non-first preprocessor branches as blanks."""
    return _blank_other_branches(_blank_literals(text))


def _strip_template_heads(head: str) -> str:
    """The head without its leading `template <...>` clauses."""
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head
        depth, i = 1, m.end()
        while i < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[i], 0)
            i += 1
        head = head[i:]


def _top_level(head: str) -> str:
    """The head with the insides of () and [] removed."""
    out, depth = [], 0
    for c in head:
        if c in "([":
            depth += 1
        elif c in ")]" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(c)
    return "".join(out)


def _function_name(head: str) -> str | None:
    """The declared name if the head is a function's declaration up to its body, else None."""
    head = ACCESS_LABEL.sub(" ", _strip_template_heads(head)).strip()
    op = re.search(r"\boperator\b\s*(\(\)|[^\s(]+)\s*\(", head)
    if op:
        name_end, paren = op.start(), op.end() - 1
    else:
        paren = head.find("(")
        while paren > 0 and head[:paren].rstrip().endswith(("requires", "alignas", "decltype", "noexcept")):
            paren = head.find("(", paren + 1)
        if paren < 0:
            return None
        name_end = paren
    before = head[:name_end]
    if "=" in _top_level(before) or SCOPE_KEYWORD.search(_top_level(before)):
        return None
    depth, i = 0, paren
    while i < len(head):
        depth += {"(": 1, ")": -1}.get(head[i], 0)
        i += 1
        if depth == 0:
            break
    if not BETWEEN.fullmatch(_top_level(head[i:])):
        return None
    if op:
        return (before.split()[-1] if before.split() and before.rstrip().endswith("::") else "") + \
            "operator" + op.group(1)
    m = re.search(r"(~?[A-Za-z_][A-Za-z0-9_:~]*)\s*(<[^()]*>)?\s*$", before)
    return m.group(1) if m else None


def _matching(text: str, i: int) -> int:
    """The index of the `}` closing the `{` at i (or the end of the text)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def _is_member_init_brace(text: str, head_start: int, i: int) -> bool:
    """Within a constructor's head `f(...) : a_{x}, b_(y) {`, whether the `{` at i is a member's."""
    before = text[head_start:i].rstrip()
    return bool(re.search(r"\)\s*(noexcept\s*)?:(?!:)", text[head_start:i])) and \
        bool(before) and (before[-1].isalnum() or before[-1] in "_>")


def _scan(text: str, start: int, end: int, line_of, out: list[Function]) -> None:
    """Finds the functions in text[start:end], a namespace or class scope (or the whole file)."""
    head_start, i, parens = start, start, 0
    while i < end:
        c = text[i]
        if c in "()":
            parens += 1 if c == "(" else -1
        elif c in ";}":
            head_start = i + 1
        elif c == "{":
            close = _matching(text, i)
            head = text[head_start:i]
            if parens > 0 or _is_member_init_brace(text, head_start, i):  # a default argument's, a member's
                i = close + 1
                continue
            name = _function_name(head)
            top = _top_level(_strip_template_heads(head))
            if name is not None:
                first = head_start + len(head) - len(head.lstrip())
                out.append(Function(name, line_of(first), line_of(i), line_of(close)))
            elif (SCOPE_KEYWORD.search(top) and "=" not in top) or re.match(r"\s*extern\s*$", top):
                _scan(text, i + 1, close, line_of, out)
            head_start, i = close + 1, close + 1
            continue
        i += 1


def functions(source: str) -> list[Function]:
    text = blank(source)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    out: list[Function] = []
    _scan(text, 0, len(text), line_of, out)
    return out
