"""The HTTPS target ([[target]] tls = true) and the server-first [[banner]] target (issue 17).

Direct, through a VLESS session (raw client) and through the real v2ray 4.34 client's HTTP entry
(`curl -p -x`): the route each proves, the access-log lines, and hostile peers: TLS garbage, a TLS
peer that never finishes its handshake, a banner client that never speaks, one that never reads.
"""
import socket
import time

from harness import (ANY_PORT, LOOPBACK, Daemon, Suite, TlsClient, V2ray, check, curl, curl_headers, free_port,
                     read_vless_response_header, require_binary, rss_kib, tcp_connect, v2ray_client_config,
                     route_session, vless_header)

suite = Suite("test_targets")
require_binary()
UUID = "6f1c0a4e-1b2c-4d3e-8f00-112233445566"
LIMITS = {"handshake_timeout_ms": 1000, "pending_timeout_ms": 2000, "min_rate_bytes": 1024,
          "min_rate_window_ms": 1000}
D = Daemon({
    "users": [{"name": "tester", "uuid": UUID}],
    "vless": [{"name": "kernel", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT},
               {"name": "https", "listen": ANY_PORT, "tls": True}],
    "banner": [{"name": "banner", "listen": ANY_PORT}],
}, limits=LIMITS)
HTTPS, BANNER, VLESS = D.port("https"), D.port("banner"), D.port("kernel")


def banner_line(data: bytes) -> str:
    check(data.endswith(b"\r\n"), data)
    text = data.decode()
    check(text.startswith("VLESSBENCH-BANNER banner "), text)
    return text[len("VLESSBENCH-BANNER banner "):].strip()


def read_line(sock: socket.socket, limit: int = 512) -> bytes:
    out = b""
    while not out.endswith(b"\n") and len(out) < limit:
        chunk = sock.recv(1)
        if not chunk:
            break
        out += chunk
    return out


@suite.test
def https_direct_serves_the_same_endpoints():
    mark = D.mark()
    r = curl(["-k", "-D", "-", "-o", "/dev/null", f"https://{LOOPBACK}:{HTTPS}/generate_204"])
    check(r.returncode == 0, r.stderr)
    h = curl_headers(r.stdout)
    check(b" 204 " in r.stdout.split(b"\r\n")[0], r.stdout)
    check(h.get("x-vlessbench-route") == "direct", h)
    r = curl(["-k", "-sS", f"https://{LOOPBACK}:{HTTPS}/bytes/100000"])
    check(r.returncode == 0 and len(r.stdout) == 100000, (r.returncode, len(r.stdout)))
    ev = D.wait_event("http.request", since=mark, listener="https", path="/bytes/100000")
    check(ev["route"] == "direct" and ev["bytes"] == 100000, ev)


@suite.test
def https_through_v2ray_proves_the_vless_route():
    http_port = free_port()
    with V2ray(v2ray_client_config(http_port, VLESS, UUID), http_port):
        mark = D.mark()
        r = curl(["-k", "-D", "-", "-o", "/dev/null", "-p", "-x", f"http://{LOOPBACK}:{http_port}",
                  f"https://{LOOPBACK}:{HTTPS}/"])
    check(r.returncode == 0, r.stderr)
    h = curl_headers(r.stdout)
    check(h.get("x-vlessbench-route", "").startswith("vless session="), h)
    check("tls;dur=" in h.get("server-timing", ""), h)
    ev = D.wait_event("http.request", since=mark, listener="https")
    check(ev["route"] == "vless" and ev["vless_user"] == "tester", ev)


@suite.test
def tls_garbage_is_a_target_reject_with_a_reason():
    mark = D.mark()
    with tcp_connect(HTTPS) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP on the TLS port
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
    ev = D.wait_event("target.reject", since=mark, listener="https")
    check(ev["reason"] == "tls_handshake_failed" and ev["bytes_seen"] > 0 and ev.get("detail"), ev)
    mark = D.mark()
    with tcp_connect(HTTPS) as s:
        s.sendall(b"\x16\x03\x01\x00\x05" + b"\xff" * 5)  # a handshake record that is no ClientHello
        s.settimeout(5)
        try:
            s.recv(4096)
        except OSError:
            pass
    ev = D.wait_event("target.reject", since=mark, listener="https")
    check(ev["reason"] == "tls_handshake_failed", ev)
    # Still serving.
    r = curl(["-k", "-o", "/dev/null", "-w", "%{http_code}", f"https://{LOOPBACK}:{HTTPS}/"])
    check(r.stdout == b"200", r.stdout)


@suite.test
def a_handshake_that_never_finishes_is_cut_at_handshake_timeout():
    mark = D.mark()
    t0 = time.monotonic()
    with tcp_connect(HTTPS) as s:
        s.sendall(b"\x16\x03\x01")  # the start of a record, then silence
        s.settimeout(10)
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        waited = time.monotonic() - t0
    check(data == b"", data)
    check(0.8 <= waited < 5, f"closed after {waited:.2f}s (handshake_timeout 1 s)")
    ev = D.wait_event("target.reject", since=mark, listener="https")
    check(ev["reason"] == "handshake_timeout" and ev["bytes_seen"] == 3, ev)


@suite.test
def banner_direct_then_echo():
    mark = D.mark()
    with tcp_connect(BANNER) as s:
        s.settimeout(5)
        check(banner_line(read_line(s)) == "direct")
        s.sendall(b"hello banner\n")
        check(read_line(s) == b"hello banner\n")
    ev = D.wait_event("banner.connection", since=mark, listener="banner")
    check(ev["route"] == "direct" and ev["bytes_in"] == 13 and ev["close_reason"] == "peer_eof", ev)
    check(ev["bytes_out"] == len("VLESSBENCH-BANNER banner direct\r\n") + 13 and ev["banner_us"] >= 0, ev)


@suite.test
def banner_through_vless_names_the_session():
    mark = D.mark()
    with TlsClient(VLESS) as c:
        c.handshake()
        c.send(vless_header(UUID, BANNER))  # the header alone: the server speaks first
        read_vless_response_header(c.stream)
        line = c.stream.read_until(b"\n")
        route = banner_line(line)
        check(route.startswith("vless session=") and route.endswith("user=tester"), route)
        c.send(b"ping\n")
        check(c.stream.read_until(b"\n") == b"ping\n")
    session = route_session(route)
    ev = D.wait_event("banner.connection", since=mark, listener="banner")
    check(ev["route"] == "vless" and ev["vless_session"] == session and ev["bytes_in"] == 5, ev)


@suite.test
def banner_silent_client_is_cut_at_pending_timeout():
    mark = D.mark()
    t0 = time.monotonic()
    with tcp_connect(BANNER) as s:
        s.settimeout(10)
        banner_line(read_line(s))
        try:
            rest = s.recv(100)
        except OSError:
            rest = b""
        waited = time.monotonic() - t0
    check(rest == b"", rest)
    check(1.5 <= waited < 6, f"closed after {waited:.2f}s (pending_timeout 2 s)")
    ev = D.wait_event("banner.connection", since=mark, listener="banner")
    check(ev["close_reason"] == "pending_timeout", ev)


@suite.test
def banner_client_that_never_reads_is_cut_with_bounded_memory():
    rss0 = rss_kib(D.proc.pid)
    mark = D.mark()
    s = tcp_connect(BANNER)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(0.5)
    sent, t0, closed = 0, time.monotonic(), False
    chunk = b"x" * 65536
    while time.monotonic() - t0 < 20:  # the echo backs up; the daemon must cut us within ~2 windows
        try:
            sent += s.send(chunk)
        except socket.timeout:
            pass
        except OSError:
            closed = True
            break
        try:
            ev = D.events("banner.connection", since=mark)
            if ev:
                closed = True
                break
        except Exception:  # noqa: BLE001 - the log may be mid-line
            pass
    s.close()
    waited = time.monotonic() - t0
    check(closed, f"not cut after {waited:.1f}s, {sent} bytes sent")
    ev = D.wait_event("banner.connection", since=mark, listener="banner")
    check(ev["close_reason"] == "slow_transfer", ev)
    check(ev["bytes_in"] < 64 << 20, ev)  # TCP backpressure, not a buffer that grows
    grew = rss_kib(D.proc.pid) - rss0
    check(grew < 16 * 1024, f"RSS grew by {grew} KiB")


@suite.test
def banner_route_holds_with_sessions_on_worker_threads():
    # [limits] threads = 2: the session that dials the banner runs on a worker thread, the banner
    # on the main one, so the banner may be accepted before the session registered it. Every
    # relayed banner must still name its session (route_registry::dial), and direct ones direct.
    d2 = Daemon({
        "users": [{"name": "tester", "uuid": UUID}],
        "vless": [{"name": "kernel", "listen": ANY_PORT}],
        "banner": [{"name": "banner", "listen": ANY_PORT}],
    }, limits={"threads": 2})
    try:
        wrong = []
        for i in range(60):
            with TlsClient(d2.port("kernel")) as c:
                c.handshake()
                c.send(vless_header(UUID, d2.port("banner")))
                read_vless_response_header(c.stream)
                route = banner_line(c.stream.read_until(b"\n"))
            if not route.startswith("vless session="):
                wrong.append((i, route))
            if i % 10 == 0:
                with tcp_connect(d2.port("banner")) as s:
                    s.settimeout(5)
                    direct = banner_line(read_line(s))
                check(direct == "direct", direct)
        check(not wrong, f"{len(wrong)}/60 relayed banners misnamed: {wrong[:3]}")
    finally:
        d2.stop()


if __name__ == "__main__":
    suite.run()
