"""Raw VLESS clients with bad inputs: each one a vless.reject with its reason, the daemon still serving.
Also a valid session's log line and headers, domain and IPv6 destinations, and TLS half-close."""
import os
import socket
import ssl
import time

from harness import (ANY_PORT, ATYP_DOMAIN, Daemon, Suite, TlsClient, addons_flow, check, client_tls_context, free_port, http_request,
                     new_uuid, policy, read_vless_response_header, require_binary, tcp_connect, vless_get,
                     route_session, vless_header)

suite = Suite("test_vless_reject")
require_binary()

UUID = new_uuid()
V6_PORT = free_port("::1")
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}, {"name": "bob", "uuid": new_uuid()}],
    "vless": [{"name": "edge", "listen": ANY_PORT, "tcp": policy(True, "on")},
              {"name": "edge6", "listen": f"[::1]:{free_port('::1')}"}],
    "target": [{"name": "http", "listen": ANY_PORT},
               {"name": "http6", "listen": f"[::1]:{V6_PORT}"}],
}, limits={"handshake_timeout_ms": 2500, "header_timeout_ms": 600, "connect_timeout_ms": 2000})
VP = D.port("edge")
TP = D.port("http")


def valid_session(path="/", **kw):
    resp, _ = vless_get(VP, UUID, TP, path, **kw)
    check(resp.status == 200, resp)
    check(resp.headers["x-vlessbench-route"].startswith("vless session="), resp.headers)
    return resp


def tls_send(payload: bytes, then_close_notify: bool = False) -> bytes:
    """Handshake, send payload, read until the server closes; returns what came back."""
    with TlsClient(VP) as c:
        c.handshake()
        if payload:
            c.send(payload)
        if then_close_notify:
            c.close_notify()
        return c.stream.read_to_eof(limit=1 << 16)


def expect_reject(reason: str, action, phase: str | None = None, timeout: float = 5.0) -> dict:
    mark = D.mark()
    action()
    e = D.wait_event("vless.reject", since=mark, reason=reason, timeout=timeout)
    for k in ("session", "listener", "client", "reason", "phase", "bytes_seen"):
        check(k in e, f"vless.reject lacks {k}: {e}")
    check(e["listener"] == "edge" and e["client"].startswith("127.0.0.1:"), e)
    if phase:
        check(e["phase"] == phase, e)
    check(not D.events("vless.session", session=e["session"]), "a rejected session also has a vless.session line")
    valid_session()  # the daemon keeps serving
    return e


def hdr(**kw) -> bytes:
    kw.setdefault("user_uuid", UUID)
    kw.setdefault("port", TP)
    return vless_header(**kw)


GET = http_request("GET", "/", headers={"Connection": "close"})


@suite.test
def valid_session_logged():
    mark = D.mark()
    resp = valid_session(headers={"X-Vlessbench-Run": "v1", "X-Vlessbench-Seq": "1"})
    sid = route_session(resp.headers["x-vlessbench-route"])
    check(resp.headers["x-vlessbench-route"] == f"vless session={sid} user=alice", resp.headers)
    st = resp.headers.get("server-timing", "")
    for part in ("tls;dur=", "vless;dur=", "upstream;dur="):
        check(part in st, f"Server-Timing {st!r} lacks {part}")
    r = D.wait_event("http.request", since=mark, run="v1")
    check(r["route"] == "vless" and r["vless_session"] == sid and r["vless_user"] == "alice", r)
    check(r["vless_client"].startswith("127.0.0.1:"), r)
    s = D.wait_event("vless.session", since=mark, session=sid)
    check(s["user"] == "alice" and s["listener"] == "edge" and s["dest"] == f"127.0.0.1:{TP}", s)
    check(s["client"] == r["vless_client"], (s, r))
    check(s["cmd"] == "tcp" and s["tls_version"] == "TLSv1.3" and s["sni"] == "localhost", s)
    check(s["alpn"] == "http/1.1", s)
    check(s["policy"]["quickack"] == "on" and s["policy"]["nodelay"] is True, s)
    p = s["phases_us"]
    order = ["tls_done", "first_vless_byte", "header_complete", "upstream_connected", "first_upstream_byte",
             "first_client_byte", "closed"]
    vals = [p[k] for k in order]
    check(all(v >= 0 for v in vals) and vals == sorted(vals), p)
    check(s["bytes_up"] == len(http_request("GET", "/", headers={"Connection": "close", "X-Vlessbench-Run": "v1",
                                                                  "X-Vlessbench-Seq": "1"})), s)
    check(s["bytes_down"] > 100, s)
    check("tcp_info" in s and "rtt_us" in s["tcp_info"] and "ato_us" in s["tcp_info"], s)
    check(s["close_reason"] in ("upstream_eof", "client_eof"), s)
    check(s["stall_suspected"] is False, s)


@suite.test
def domain_destination():
    mark = D.mark()
    resp, _ = vless_get(VP, UUID, TP, "/", dest="localhost")
    check(resp.status == 200 and "vless" in resp.headers["x-vlessbench-route"], resp)
    s = D.wait_event("vless.session", since=mark)
    check(s["dest"] == f"localhost:{TP}" and s["phases_us"].get("resolved", -1) >= 0, s)


@suite.test
def ipv6_destination():
    mark = D.mark()
    resp, _ = vless_get(VP, UUID, V6_PORT, "/", dest="::1")
    check(resp.status == 200 and "vless" in resp.headers["x-vlessbench-route"], resp)
    r = D.wait_event("http.request", since=mark, listener="http6")
    check(r["route"] == "vless" and r["vless_user"] == "alice", r)
    s = D.wait_event("vless.session", since=mark)
    check(s["dest"] == f"[::1]:{V6_PORT}", s)


@suite.test
def ipv6_listener_and_tls12():
    mark = D.mark()
    with TlsClient(D.port("edge6"), host="::1") as c:
        c.handshake()
        c.send(hdr() + GET)
        read_vless_response_header(c.stream)
        check(c.stream.read_response().status == 200)
    s = D.wait_event("vless.session", since=mark, listener="edge6")
    check(s["client"].startswith("[::1]:") and s["user"] == "alice", s)
    mark = D.mark()
    ctx = client_tls_context(tls13=False)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with TlsClient(VP, context=ctx) as c:
        c.handshake()
        c.send(hdr() + GET)
        read_vless_response_header(c.stream)
        check(c.stream.read_response().status == 200)
    s = D.wait_event("vless.session", since=mark, listener="edge")
    check(s["tls_version"] == "TLSv1.2" and s["cipher"].startswith("TLS_ECDHE_"), s)


@suite.test
def wrong_uuid():
    e = expect_reject("unknown_user", lambda: tls_send(hdr(user_uuid=new_uuid()) + GET), phase="header")
    check("user" not in e, e)


@suite.test
def bad_version():
    expect_reject("bad_version", lambda: tls_send(hdr(version=1) + GET))


@suite.test
def truncated_header_then_close():
    e = expect_reject("truncated_header", lambda: tls_send(hdr()[:10], then_close_notify=True))
    check(e["bytes_seen"] == 10, e)


@suite.test
def no_header_then_close():
    expect_reject("no_header", lambda: tls_send(b"", then_close_notify=True))


@suite.test
def unknown_command():
    expect_reject("bad_command", lambda: tls_send(hdr(cmd=4) + GET))


@suite.test
def mux_command():
    # Mux.Cool is served (test_mux.py): a first frame with metadata length 0 ends the session.
    mark = D.mark()
    tls_send(hdr(cmd=3) + b"\x00\x00")
    e = D.wait_event("vless.session", since=mark, cmd="mux")
    check(e["close_reason"] == "mux_error" and e["mux_error"] == "metadata_too_short" and e["subs"] == 0, e)


@suite.test
def udp_command_denied_destination():
    # UDP is served (test_vless_udp.py); its destination obeys [destinations] like TCP's.
    e = expect_reject("dest_not_allowed", lambda: tls_send(hdr(cmd=2, port=53, addr="192.0.2.1") + b"\x00\x01x"))
    check(e.get("detail") == "192.0.2.1:53", e)


@suite.test
def flow_set():
    # Vision is served (test_vision.py); XTLS's old flows are not.
    e = expect_reject("flow_unsupported", lambda: tls_send(hdr(addons=addons_flow("xtls-rprx-direct")) + GET))
    check(e.get("detail") == "xtls-rprx-direct", e)


@suite.test
def bad_address_type():
    expect_reject("bad_address_type", lambda: tls_send(hdr(atyp=4) + b"\x7f\x00\x00\x01" + GET))


@suite.test
def zero_length_domain():
    expect_reject("empty_domain", lambda: tls_send(hdr(addr="", atyp=ATYP_DOMAIN) + GET))


@suite.test
def bad_domain_bytes():
    expect_reject("bad_domain", lambda: tls_send(hdr(addr="local host", atyp=ATYP_DOMAIN) + GET))


@suite.test
def port_zero():
    expect_reject("bad_port", lambda: tls_send(hdr(port=0) + GET))


@suite.test
def unresolvable_domain():
    expect_reject("resolve_failed", lambda: tls_send(hdr(addr="no-such-host.invalid", atyp=ATYP_DOMAIN) + GET),
                  phase="resolve")


@suite.test
def connect_refused():
    closed = free_port()
    e = expect_reject("connect_failed", lambda: tls_send(hdr(port=closed) + GET), phase="connect")
    check(e.get("dest") == f"127.0.0.1:{closed}" and e.get("user") == "alice", e)


def raw_tcp(payload: bytes):
    with tcp_connect(VP) as s:
        s.sendall(payload)
        s.settimeout(5)
        try:
            while s.recv(65536):
                pass
        except (ConnectionResetError, socket.timeout):
            pass


@suite.test
def tls_garbage():
    expect_reject("tls_handshake_failed", lambda: raw_tcp(os.urandom(64) + b"\x16\x03\x01\xff\xff" + os.urandom(300)),
                  phase="tls")


@suite.test
def plain_http_on_tls_port():
    expect_reject("tls_handshake_failed", lambda: raw_tcp(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
                  phase="tls")


@suite.test
def silent_after_tls():
    def action():
        t0 = time.monotonic()
        with TlsClient(VP, timeout=5) as c:
            c.handshake()
            check(c.stream.at_eof(), "silent client not closed")
        dt = time.monotonic() - t0
        # Shorter than the handshake deadline, and it must hold (not fall back to the longer one).
        check(0.5 < dt < 2.0, f"header timeout after {dt:.2f}s (header_timeout_ms = 600)")
    expect_reject("header_timeout", action, phase="header")


@suite.test
def silent_tcp_client():
    def action():
        t0 = time.monotonic()
        with tcp_connect(VP, timeout=5) as s:
            check(s.recv(100) == b"", "silent TCP client got data")
        dt = time.monotonic() - t0
        check(2.3 < dt < 4.5, f"handshake timeout after {dt:.2f}s (handshake_timeout_ms = 2500)")
    expect_reject("handshake_timeout", action, phase="tls")


@suite.test
def header_split_over_many_records():
    # Not a reject: a header dribbled in 1-byte TLS records still makes a session.
    with TlsClient(VP) as c:
        c.handshake()
        data = hdr() + GET
        for i in range(len(data)):
            c.send(data[i:i + 1])
        read_vless_response_header(c.stream)
        r = c.stream.read_response()
        check(r.status == 200 and "vless" in r.headers["x-vlessbench-route"], r)


@suite.test
def half_close_gets_whole_response():
    mark = D.mark()
    n = 300_000
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr() + http_request("GET", f"/bytes/{n}", headers={"X-Vlessbench-Seq": "half"}))
        c.close_notify()  # our write side is done; the response must still arrive whole
        read_vless_response_header(c.stream)
        r = c.stream.read_response()
        check(r.status == 200 and len(r.body) == n, (r.status, len(r.body)))
        check(c.stream.at_eof(), "session not closed after the target finished")
    e = D.wait_event("http.request", since=mark, seq="half")
    check(e["bytes"] == n and e["route"] == "vless", e)
    s = D.wait_event("vless.session", since=mark, session=e["vless_session"])
    check(s["bytes_down"] > n and s["close_reason"] in ("client_eof", "upstream_eof"), s)


@suite.test
def too_many_sessions():
    uid = new_uuid()
    with Daemon({"users": [{"name": "u", "uuid": uid}],
                 "vless": [{"name": "small", "listen": ANY_PORT}],
                 "target": [{"name": "t", "listen": ANY_PORT}]},
                limits={"max_sessions": 2}) as d:
        # Only authorised sessions take a slot (a bare handshake does not: test_capacity).
        held = []
        for _ in range(2):
            c = TlsClient(d.port("small")).handshake()
            held.append(c)
            c.send(vless_header(uid, d.port("t")) + http_request("GET", "/generate_204"))
            read_vless_response_header(c.stream)
            check(c.stream.read_response().status == 204)
        try:
            with tcp_connect(d.port("small")) as s:
                s.settimeout(5)
                check(s.recv(10) == b"", "third session not closed")
            e = d.wait_event("vless.reject", reason="too_many_sessions")
            check(e["phase"] == "accept" and e["listener"] == "small" and e["bytes_seen"] == 0, e)
            check(e["client"].startswith("127.0.0.1:"), e)
        finally:
            for c in held:
                c.close()
        # Slots free again once the held sessions end.
        deadline = time.monotonic() + 5
        while True:
            try:
                resp, _ = vless_get(d.port("small"), uid, d.port("t"))
                break
            except (ConnectionError, EOFError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        check(resp.status == 200, resp)


@suite.test
def still_serving_at_end():
    check(D.running(), "daemon died")
    valid_session()
    check(not D.unexpected_exceptions(), D.stderr())


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
