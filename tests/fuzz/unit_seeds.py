#!/usr/bin/env python3
"""Regenerates the fuzz seeds taken from the unit tests' vectors.

    python3 tests/fuzz/unit_seeds.py [--out tests/fuzz/corpus] [--check]

Reads tests/unit/**/test_*.cpp, finds every wire vector written as a constant expression of the house
notation (`bytes({0x00, 0x05}) + "hello"`, adjacent string literals, `std::string(15, '\\0')`),
and writes each one that a unit test file hands to its parser as corpus/TARGET/unit-FILE-HASH
(FILE without test_ and .cpp, HASH the first 10 hex digits of the bytes' SHA-256), so the vectors live once, in the
unit tests, and the corpus follows them. Expressions that name a variable or call a helper are
not evaluated (the helpers' outputs are covered by the round trips the fuzzers check). A run
first deletes the unit-* files, so the set is exactly what this script makes; --check only
reports whether the corpus is current (exit 1 if not)."""
import argparse
import ast
import hashlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNIT = HERE.parent / "unit"



def binary(value: bytes, built: bool) -> bool:
    """A wire vector of a binary protocol: written with bytes({...}) or holding a byte that is not
    printable ASCII (test names, tags and expected reasons are neither)."""
    return built or any(b < 0x20 or b > 0x7E for b in value)


def tag(value: bytes) -> bool:
    return re.fullmatch(rb"\[[a-z0-9_]+\]", value) is not None


# Unit test file -> [(fuzz target, accept(value, built))]: a vector goes to the first target of
# its file that accepts it.
SOURCES = {
    "test_vless_codec.cpp": [("vless_header", binary)],
    "test_vless_admission.cpp": [("vless_header", lambda v, b: binary(v, b) and v[:1] == b"\x00" and len(v) > 17)],
    "test_mux_frame.cpp": [("mux_frame", binary)],
    "test_vision.cpp": [("vision_padding", binary)],
    "test_mux_subs.cpp": [("mux_frame", binary)],
    "test_mux_client.cpp": [("mux_client", binary)],
    "test_sing_mux.cpp": [("smux_frame", lambda v, b: binary(v, b) and v[:1] in (b"\x01", b"\x02") and len(v) >= 8),
                          ("yamux_frame", lambda v, b: binary(v, b) and v[:1] == b"\x00" and len(v) >= 12),
                          ("sing_mux_header", binary)],
    "test_sing_mux_framing.cpp": [("smux_frame", lambda v, b: binary(v, b) and v[:1] in (b"\x01", b"\x02") and len(v) >= 8),
                                  ("yamux_frame", lambda v, b: binary(v, b) and v[:1] == b"\x00" and len(v) >= 12),
                                  ("sing_mux_header", binary)],
    "test_ws_frame.cpp": [("ws_frame", binary)],
    "test_ws_upgrade.cpp": [("ws_upgrade", lambda v, b: v.startswith((b"GET ", b"HTTP/")))],
    "test_gun_codec.cpp": [("gun_message", binary)],
    "test_udp_framing.cpp": [("udp_packet", binary)],
    "test_socks5_udp.cpp": [("socks5_udp", binary)],
    "test_dns_message.cpp": [("dns_response", lambda v, b: binary(v, b) and len(v) >= 12 and v[2] & 0x80),
                             ("dns_query", binary)],
    "test_ntp_stun.cpp": [("stun_message", lambda v, b: binary(v, b) and len(v) >= 20 and v[4:8] == b"\x21\x12\xa4\x42"),
                          ("ntp_packet", lambda v, b: binary(v, b) and len(v) >= 40)],
    "test_http_parser.cpp": [("http_response", lambda v, b: v.startswith(b"HTTP/")),
                             ("http_request", lambda v, b: b"\r\n" in v or b"\n" in v)],
    "test_share_link.cpp": [("share_link", lambda v, b: v.startswith(b"vless://"))],
    "test_transport_spec.cpp": [("transport_query", lambda v, b: v.startswith((b"security=", b"type=")) and b" " not in v)],
    "test_log_query.cpp": [("log_query", lambda v, b: v.startswith((b"run=", b"token=")))],
    "test_net_address.cpp": [("host_header", lambda v, b: 0 < len(v) < 300 and b" " not in v and not tag(v))],
    "test_ja4.cpp": [("client_hello", lambda v, b: binary(v, b) and v[:1] == b"\x03" and len(v) > 38)],
    "test_probe_result.cpp": [("probe_result", lambda v, b: v.lstrip()[:1] in (b"{", b"["))],
    "test_config.cpp": [("config", lambda v, b: b"=" in v and b"[" in v)],
    "test_reload_plan.cpp": [("config", lambda v, b: b"=" in v and b"[" in v)],
}

TOKEN = re.compile(r"""
    (?P<bytes>bytes\(\{(?P<list>[^{}]*)\}\))
  | (?P<fill>std::string\(\s*(?P<n>\d+)\s*,\s*'(?P<ch>\\?.|\\x[0-9a-fA-F]+)'\s*\))
  | (?P<raw>R"(?P<delim>[^(\s]*)\((?P<rawbody>.*?)\)(?P=delim)")
  | (?P<str>(?:u8)?"(?:[^"\\\n]|\\.)*")
  | (?P<plus>\+)
  | (?P<space>\s+|//[^\n]*)
""", re.VERBOSE | re.DOTALL)


def c_string(lit: str) -> bytes:
    """A C++ narrow string literal's bytes (the escapes the unit tests use)."""
    body = lit[lit.index('"') + 1:-1]
    out, i = bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(body[i + 2:i + 2 + n], 16)).encode("utf-8")
            i += 2 + n
        elif e == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += 2 + len(m.group(0))
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", '"': b'"', "'": b"'", "0": b"\0",
                    "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}[e]
            i += 2
    return bytes(out)


def c_char(ch: str) -> int:
    return c_string('"' + ch + '"')[0]


def byte_list(text: str) -> bytes | None:
    out = bytearray()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("'"):
            out.append(c_char(item[1:-1]))
            continue
        try:
            out.append(ast.literal_eval(item) & 0xFF)
        except (ValueError, SyntaxError):
            return None  # a name or a cast: not a constant
    return bytes(out)


def vectors(text: str):
    """(line, bytes) of every maximal constant expression of bytes()/literals/fills joined by +."""
    pos, found = 0, []
    opener = re.compile(r'bytes\(\{|(?<![\w\'\\])(?:u8|R)?"|std::string\(\s*\d+\s*,')
    while True:
        m = opener.search(text, pos)
        if not m:
            return found
        start, i = m.start(), m.start()
        if text.rfind("#include", text.rfind("\n", 0, start) + 1, start) >= 0:
            pos = text.find("\n", start) + 1 or len(text)
            continue
        value, constant, pending_plus, operands, built = b"", True, False, 0, False
        while i < len(text):
            t = TOKEN.match(text, i)
            if not t:
                break
            if t.group("space"):
                i = t.end()
                continue
            if t.group("plus"):
                pending_plus = True
                i = t.end()
                continue
            if operands and not pending_plus and not (t.group("str") or t.group("raw")):
                break  # adjacent literals concatenate; anything else needs a +
            if t.group("bytes"):
                b = byte_list(t.group("list"))
                constant = constant and b is not None
                value += b or b""
                built = True
            elif t.group("fill"):
                value += bytes([c_char(t.group("ch"))]) * int(t.group("n"))
            elif t.group("raw") is not None:
                value += t.group("rawbody").encode("utf-8")
            else:
                value += c_string(t.group("str"))
            operands += 1
            pending_plus = False
            i = t.end()
        # `name + "..."` or `"..." + name`: part of the value is not written here.
        before = re.search(r"[\w)\]]\s*\+\s*$", text[max(0, start - 60):start])
        if constant and operands and not pending_plus and not before:
            found.append((text.count("\n", 0, start) + 1, value, built))
        pos = max(i, start + 1)


DEFINITION = re.compile(r"\bconst\s+(?:std::string|auto)\s+(\w+)\s*=\s*(.*?);\s*$", re.DOTALL | re.MULTILINE)
NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*")


def evaluate(expr: str, names: dict):
    """The bytes of a whole expression of constants and already known names, else None."""
    value, i, want_operand, built = b"", 0, True, False
    while i < len(expr):
        t = TOKEN.match(expr, i)
        if t and t.group("space"):
            i = t.end()
            continue
        if t and t.group("plus"):
            if want_operand:
                return None
            want_operand = True
            i = t.end()
            continue
        if not want_operand and not (t and (t.group("str") or t.group("raw"))):
            return None
        if t and t.group("bytes"):
            b = byte_list(t.group("list"))
            if b is None:
                return None
            value += b
            built = True
        elif t and t.group("fill"):
            value += bytes([c_char(t.group("ch"))]) * int(t.group("n"))
        elif t and t.group("raw") is not None:
            value += t.group("rawbody").encode("utf-8")
        elif t and t.group("str"):
            value += c_string(t.group("str"))
        else:
            n = NAME.match(expr, i)
            if not n or n.group(1) not in names:
                return None
            value += names[n.group(1)][0]
            built = built or names[n.group(1)][1]
            i = n.end()
            want_operand = False
            continue
        want_operand = False
        i = t.end()
    return None if want_operand else (value, built)


def definitions(text: str):
    """(line, bytes, built) of each `const std::string NAME = ...;` whose value is constant, names
    defined before it included (`bytes({0x00}) + uuid_wire + ...`)."""
    names, found = {}, []
    for m in DEFINITION.finditer(text):
        v = evaluate(m.group(2), names)
        if v is not None:
            names[m.group(1)] = v
            found.append((text.count("\n", 0, m.start()) + 1, v[0], v[1]))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / "corpus")
    ap.add_argument("--check", action="store_true", help="report whether the corpus is current; write nothing")
    args = ap.parse_args()
    want: dict = {}
    for fname, routes in SOURCES.items():
        # tests/unit mirrors the source folders: a file is found by its name in any of them.
        src = next(iter(sorted(UNIT.rglob(fname))), None)
        if src is None:
            print(f"missing: {UNIT}/**/{fname}", file=sys.stderr)
            return 2
        stem = fname.removeprefix("test_").removesuffix(".cpp")
        text = src.read_text()
        for line, value, built in definitions(text) + vectors(text):
            if not value or len(value) > 4096:
                continue
            for target, accept in routes:
                if accept(value, built):
                    # Named by content, so that moving a test does not rename its seeds.
                    names = want.setdefault(target, {})
                    names.setdefault(value, f"unit-{stem}-{hashlib.sha256(value).hexdigest()[:10]}")
                    break
    have = {}
    for d in sorted(p for p in args.out.iterdir() if p.is_dir()):
        for f in d.iterdir():
            if f.name.startswith("unit-"):
                have[(d.name, f.name)] = f.read_bytes()
    new = {(t, name): v for t, vs in want.items() for v, name in vs.items()}
    if args.check:
        stale = sorted(set(have.items()) ^ set(new.items()))
        for (t, name), _ in stale:
            print(f"stale: {t}/{name}")
        if stale:
            print("the unit tests' vectors changed: run python3 tests/fuzz/unit_seeds.py and commit the corpus")
        return 1 if stale else 0
    for (t, name) in have:
        (args.out / t / name).unlink()
    for (t, name), v in sorted(new.items()):
        (args.out / t).mkdir(exist_ok=True)
        (args.out / t / name).write_bytes(v)
    for t in sorted(want):
        print(f"{t}: {len(want[t])} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
