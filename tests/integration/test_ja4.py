"""The JA4 client fingerprint (core/wire/ja4.hpp, docs/sessions.md "Client fingerprint") of real clients:
the runner's built-in client (BoringSSL, and its OpenSSL 3 build when configured), python's ssl
(TLS 1.3 and 1.2), the real v2ray 4.34 client, curl, and Debian's headless chromium (skipped when
it is missing). Each one's sessions carry a well-formed ja4 in `vless.session` (or `vless.reject`
for curl and chromium, which speak HTTP, not VLESS, after TLS; and `http.request` on the HTTPS
target); the same client gives the same ja4 twice; different clients give different ones; the
VLESS client's ja4 is in the target's Server-Timing. End to end, JA4.md's example ClientHello sent
raw gives the spec's fingerprint, and one the parser refuses only loses its fingerprint. Prints the
table docs/sessions.md records.
"""
import json
import re
import ssl
import subprocess

from harness import (ANY_PORT, CLIENT_BIN, BIN, LOOPBACK, Daemon, Skip, Suite, TlsClient, V2ray, check, client_tls_context, curl,
                     curl_headers, free_port, http_request, read_vless_response_header, require_binary,
                     tcp_connect, tempdir, v2ray_client_config, vless_header)

suite = Suite("test_ja4")
require_binary()
JA4 = re.compile(r"^t1[23][di]\d{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$")
UUID = "0b7e4a52-6c1d-4f3e-9a10-aabbccddeeff"
D = Daemon({
    "users": [{"name": "tester", "uuid": UUID}],
    "vless": [{"name": "kernel", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT},
               {"name": "https", "listen": ANY_PORT, "tls": True}],
}, limits={"header_timeout_ms": 2000})
VP, TP, HTTPS = D.port("kernel"), D.port("http"), D.port("https")
from devtools import CHROMIUM, chromium_dump_dom
measured: dict[str, str] = {}  # client kind -> its ja4


def well_formed(ja4: str, what) -> str:
    check(isinstance(ja4, str) and JA4.match(ja4), (ja4, what))
    return ja4


def same_twice(kind: str, first: str, second: str) -> None:
    well_formed(first, kind)
    check(first == second, f"{kind}: {first} then {second}")
    measured[kind] = first


def session_ja4s(mark: int, count: int) -> list[str]:
    """The ja4 of the first `count` vless.session lines after mark (waiting for them)."""
    D.wait_event("vless.session", since=mark, timeout=10, pred=lambda _: len(D.events("vless.session", since=mark)) >= count)
    return [e.get("ja4") for e in D.events("vless.session", since=mark)[:count]]


def runner(binary, kind: str) -> None:
    link = (f"vless://{UUID}@{LOOPBACK}:{VP}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#ja4")
    seen = []
    for run in range(2):
        mark = D.mark()
        out = tempdir("vlessbench-run-")
        r = subprocess.run([str(binary), "run", "--target", f"http://{LOOPBACK}:{TP}/", "--path", f"v={link}",
                            "--new", "2", "--reuse", "1", "--warmup", "0", "--out", str(out), "--seed", str(run + 1)],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}")
        ja4s = session_ja4s(mark, 2)
        check(len(set(ja4s)) == 1, ja4s)
        seen.append(ja4s[0])
    same_twice(kind, *seen)


@suite.test
def runner_builtin_client():
    runner(CLIENT_BIN / "vlessbench", "runner (BoringSSL)")


@suite.test
def runner_openssl_build():
    binary = CLIENT_BIN / "vlessbench-openssl"
    if not binary.exists():
        raise Skip("vlessbench-openssl not built (-DVLESSBENCH_RUNNER_OPENSSL=ON)")
    runner(binary, "runner (OpenSSL 3)")


def python_session(tls13: bool) -> tuple[str, dict]:
    mark = D.mark()
    with TlsClient(VP, context=client_tls_context(tls13)) as c:
        host, port = c.sock.getsockname()[:2]
        c.handshake()
        c.send(vless_header(UUID, TP) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        resp = c.stream.read_response()
    # This connection's own line: a session of an earlier check may still be closing after mark.
    me = f"{host}:{port}"
    line = D.wait_event("vless.session", since=mark, timeout=10, client=me)
    return line.get("ja4"), resp.headers


@suite.test
def python_ssl_tls13_and_tls12():
    first, headers = python_session(True)
    second, _ = python_session(True)
    same_twice("python ssl (TLS 1.3)", first, second)
    check(first.startswith("t13d"), first)  # SNI "localhost"
    # The VLESS client's ja4 is the target's Server-Timing entry too.
    timing = headers.get("server-timing", headers.get("Server-Timing", ""))
    check(f'ja4;desc="{first}"' in timing, timing)
    tls12, _ = python_session(False)
    well_formed(tls12, "python ssl TLS 1.2")
    # Without a TLS 1.3 minimum python offers 1.3 too: its highest supported version says 13.
    check(tls12.startswith("t13"), tls12)
    ctx = client_tls_context(False)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    mark = D.mark()
    with TlsClient(VP, context=ctx) as c:
        c.handshake()
        c.send(vless_header(UUID, TP) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        c.stream.read_response()
    only12 = session_ja4s(mark, 1)[0]
    well_formed(only12, "python ssl TLS 1.2 only")
    check(only12.startswith("t12d"), only12)
    measured["python ssl (TLS 1.2 only)"] = only12


@suite.test
def v2ray_client():
    port = free_port()
    seen = []
    with V2ray(v2ray_client_config(port, VP, UUID), port) as v:
        for i in range(2):
            mark = D.mark()
            r = curl(["-i", "-x", f"http://127.0.0.1:{port}", "-H", "Connection: close",
                      f"http://127.0.0.1:{TP}/generate_204"])
            check(r.returncode == 0, (r.returncode, r.stderr, v.output()[-2000:]))
            ja4 = session_ja4s(mark, 1)[0]
            timing = curl_headers(r.stdout).get("server-timing", "")
            check(f'ja4;desc="{ja4}"' in timing, (timing, ja4))
            seen.append(ja4)
    same_twice("v2ray 4.34", *seen)


def reject_ja4(mark: int) -> str:
    e = D.wait_event("vless.reject", since=mark, timeout=10, pred=lambda x: "ja4" in x)
    check(e["phase"] == "header", e)  # TLS done, then HTTP where a VLESS header belongs
    return e["ja4"]


@suite.test
def curl_to_the_vless_port_and_the_https_target():
    seen = []
    for _ in range(2):
        mark = D.mark()
        curl(["-k", "-o", "/dev/null", f"https://localhost:{VP}/"], timeout=5)
        seen.append(reject_ja4(mark))
    same_twice("curl", *seen)
    # The HTTPS target's hook: the same client, the same ClientHello, the same fingerprint.
    mark = D.mark()
    r = curl(["-k", "-o", "/dev/null", "-w", "%{http_code}", f"https://localhost:{HTTPS}/generate_204"])
    check(r.stdout == b"204", r.stdout)
    e = D.wait_event("http.request", since=mark, listener="https")
    check(e.get("ja4") == seen[0], (e, seen[0]))
    check(e["route"] == "direct", e)


def chromium_fetch(url: str) -> None:
    chromium_dump_dom(url, "--ignore-certificate-errors")


@suite.test
def chromium_headless():
    if not CHROMIUM:
        raise Skip("chromium not installed (tools/deps.sh --test)")
    seen = []
    for _ in range(2):
        mark = D.mark()
        chromium_fetch(f"https://localhost:{HTTPS}/")
        e = D.wait_event("http.request", since=mark, listener="https", path="/", timeout=10)
        seen.append(e.get("ja4"))
    same_twice("chromium", *seen)
    # The same browser at the VLESS port: a reject that names the same fingerprint.
    mark = D.mark()
    chromium_fetch(f"https://localhost:{VP}/")
    check(reject_ja4(mark) == seen[0], seen[0])


def u16(v: int) -> bytes:
    return v.to_bytes(2, "big")


def client_hello_record(ciphers, extensions) -> bytes:
    """A TLS record holding one ClientHello: legacy version 1.2, fixed random and session id."""
    body = u16(0x0303) + bytes(32) + bytes([32]) + bytes(range(32))
    body += u16(2 * len(ciphers)) + b"".join(u16(c) for c in ciphers) + b"\x01\x00"
    exts = b"".join(u16(t) + u16(len(data)) + data for t, data in extensions)
    body += u16(len(exts)) + exts
    msg = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + u16(len(msg)) + msg


def send_raw(record: bytes) -> None:
    with tcp_connect(VP) as sock:
        sock.sendall(record)
        sock.settimeout(1)  # the server answers and waits for a Finished that never comes
        try:
            while sock.recv(4096):
                pass
        except (TimeoutError, ConnectionError):
            pass


def u16_list(values, long_length=True) -> bytes:
    data = b"".join(u16(v) for v in values)
    return (u16(len(data)) if long_length else bytes([len(data)])) + data


def alpn(*protocols) -> bytes:
    data = b"".join(bytes([len(p)]) + p for p in protocols)
    return u16(len(data)) + data


SNI = u16(14) + b"\x00" + u16(11) + b"example.com"
SIGALGS = u16_list([0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601])


@suite.test
def the_spec_example_end_to_end():
    """JA4.md's example ClientHello (its ciphers, extensions and signature algorithms, GREASE
    added) sent raw: the daemon's fingerprint of the bytes BoringSSL handed over is the spec's."""
    ciphers = [0x3A3A, 0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8, 0xC013, 0xC014,
               0x009C, 0x009D, 0x002F, 0x0035]
    x25519_share = u16(36) + u16(0x001D) + u16(32) + bytes(range(1, 33))
    extensions = [(0x8A8A, b""), (0x001B, b"\x02\x00\x02"), (0x0000, SNI), (0x0033, x25519_share),
                  (0x0010, alpn(b"h2", b"http/1.1")), (0x4469, b""), (0x0017, b""), (0x002D, b"\x01\x01"),
                  (0x000D, SIGALGS), (0x0005, b"\x01\x00\x00\x00\x00"), (0x0023, b""), (0x0012, b""),
                  (0x002B, u16_list([0x5A5A, 0x0304, 0x0303], False)), (0xFF01, b"\x00"), (0x000B, b"\x01\x00"),
                  (0x000A, u16_list([0x6A6A, 0x001D, 0x0017])), (0x0015, b"\x00\x00"), (0x9A9A, b"\x00")]
    mark = D.mark()
    send_raw(client_hello_record(ciphers, extensions))
    e = D.wait_event("vless.reject", since=mark, timeout=10, pred=lambda x: "ja4" in x)
    check(e["ja4"] == "t13d1516h2_8daaf6152771_e5627efa2ab1", e)


@suite.test
def a_hello_the_parser_refuses_costs_only_its_fingerprint():
    """An ALPN extension whose list length lies: no ja4, and BoringSSL (not the callback) decides
    the handshake's fate; the daemon serves the next client as before."""
    mark = D.mark()
    send_raw(client_hello_record([0xC02F, 0x1301], [(0x0000, SNI), (0x0010, u16(9) + b"\x02h2"),
                                                  (0x002B, u16_list([0x0304], False))]))
    e = D.wait_event("vless.reject", since=mark, timeout=10)
    check("ja4" not in e and e["reason"] == "tls_handshake_failed", e)
    ja4, _ = python_session(True)
    check(ja4 == measured.get("python ssl (TLS 1.3)", ja4), ja4)


@suite.test
def different_clients_differ():
    kinds = [k for k in ("runner (BoringSSL)", "python ssl (TLS 1.3)", "v2ray 4.34", "curl", "chromium")
             if k in measured]
    check(len(kinds) >= 4, measured)
    values = [measured[k] for k in kinds]
    check(len(set(values)) == len(values), json.dumps(measured, indent=1))
    print("  measured:")
    for kind, ja4 in measured.items():
        print(f"    {kind:28} {ja4}")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
