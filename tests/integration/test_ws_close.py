#!/usr/bin/env python3
"""The WebSocket and HTTPUpgrade close after the destination's EOF (issue 28, docs/sessions.md
"Closing").

v2ray's and Xray's ws clients, used as a plain HTTP proxy (`curl -x`, no CONNECT: what browsers do
for http://), read a close frame that comes before they close as an error and drop the answer they
already hold ("websocket: close 1000 (normal)", a 503 for the user). Their own servers keep the
WebSocket open after the destination's EOF until the client closes, for their policy's uplinkOnly.
So does the daemon now, for [limits] close_linger_ms:

- the real Xray 25.9 and v2ray 4.34 ws clients (configs from `vlessbenchd links`, checked by the
  core's own checker) as plain HTTP proxies: 200 of 200 answered, each answer's route a VLESS
  session of the ws listener in the access log; Xray over HTTPUpgrade the same;
- a raw RFC 6455 client: after the destination's EOF the server still answers a ping (no close
  frame before it), answers the client's close with its own 1000 and closes; without a client
  close the server's close frame comes once close_linger_ms has passed; a SIGTERM ends a linger at
  once; the session's close_reason stays upstream_eof.
"""
from __future__ import annotations

import concurrent.futures
import os
import socket
import struct
import subprocess
import time

import harness as h
from harness import peers
from harness import LOOPBACK, check

suite = h.Suite("test_ws_close")
h.require_binary()
# 50 in the sanitizer trees: the ASan copy is there for the linger's lifetimes, not the count.
REQUESTS = int(os.environ.get("VLESSBENCH_WS_CLOSE_REQUESTS") or (50 if h.SANITIZED else 200))
KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def make_daemon(linger_ms: int | None = None, drain_ms: int | None = None) -> h.Daemon:
    port = h.free_port
    limits = {}
    if linger_ms is not None:
        limits["close_linger_ms"] = linger_ms
    if drain_ms is not None:
        limits["drain_timeout_ms"] = drain_ms
    cfg = {
        "users": [{"name": "tester", "uuid": h.new_uuid()}],
        "vless": [
            {"name": "ws", "listen": f"{LOOPBACK}:{port()}", "transport": "ws", "path": "/ws"},
            {"name": "wsed", "listen": f"{LOOPBACK}:{port()}", "transport": "ws", "path": "/ed",
             "max_early_data": 2048},
            {"name": "up", "listen": f"{LOOPBACK}:{port()}", "transport": "httpupgrade", "path": "/up"},
        ],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
    }
    if limits:
        cfg["limits"] = limits
    return h.Daemon(cfg)


D = make_daemon()  # the default close_linger_ms


def links() -> str:
    r = subprocess.run([str(h.DAEMON), "links", "-c", str(D.config_path), "--no-qr"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, r.stderr)
    return r.stdout


def core_client(core: str, listener: str) -> tuple[peers.Core, int]:
    """core's http inbound -> the v2ray/Xray outbound `links` prints for the listener."""
    outbound = peers.links_json(links(), f"{listener}-tester", "v2ray / Xray (outbounds):")
    entry = peers.inbound_port()
    cfg = {"log": {"loglevel": "warning"},
           "inbounds": [{"listen": LOOPBACK, "port": entry, "protocol": "http", "settings": {}}],
           "outbounds": [outbound]}
    return peers.Core(core, cfg, [entry]), entry


def plain_proxy_requests(entry: int, count: int) -> list[tuple[str, str]]:
    """count plain-HTTP-proxy GETs (4 at a time): (status, route header) each."""
    url = f"http://{LOOPBACK}:{D.target_port}/generate_204"

    def one(_):
        # What `curl -x` sends for an http:// URL (a plain proxy request, no CONNECT), on a
        # connection of its own; the answer is read to the end of its head (a 204 has no body).
        try:
            with socket.create_connection((LOOPBACK, entry), timeout=10) as s:
                s.sendall(f"GET {url} HTTP/1.1\r\nHost: {LOOPBACK}:{D.target_port}\r\n"
                          "User-Agent: test_ws_close\r\nAccept: */*\r\n\r\n".encode())
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
        except OSError as e:
            return f"socket error {e}", ""
        text = head.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
        status = text.split(" ", 2)[1] if text.startswith("HTTP/") else f"no answer ({len(head)} bytes)"
        route = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                      if line.lower().startswith("x-vlessbench-route:")), "")
        return status, route

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(count)))


def check_answers(core: str, listener: str, answers: list[tuple[str, str]], since: int) -> None:
    statuses = [s for s, _ in answers]
    ok = statuses.count("204")
    print(f"FIGURE {core}_{listener}_plain_proxy_answered = {ok}/{len(answers)}", flush=True)
    check(ok == len(answers), f"{core} over {listener}: {len(answers) - ok} of {len(answers)} lost: "
                              f"{sorted(set(statuses))}")
    # Each answer's route names a VLESS session of this listener, and the access log has it.
    transport = "httpupgrade" if listener == "up" else "ws"
    ids = set()
    for _, route in answers:
        fields = dict(p.split("=", 1) for p in route.split() if "=" in p)
        check(route.startswith("vless ") and fields.get("transport") == transport and "session" in fields,
              f"answer not proven through {listener}: {route!r}")
        ids.add(int(fields["session"]))
    deadline = time.monotonic() + 15
    while True:
        logged = {e["session"]: e for e in D.events("vless.session", since=since, listener=listener)}
        if ids <= logged.keys() or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    missing = ids - logged.keys()
    check(not missing, f"{len(missing)} sessions of the answers have no vless.session line: {sorted(missing)[:5]}")
    reasons = {logged[i]["close_reason"] for i in ids}
    check(reasons <= {"client_eof", "upstream_eof"}, f"close reasons {reasons}")


def real_client(core: str, listener: str) -> None:
    mark = D.mark()
    c, entry = core_client(core, listener)
    with c:
        answers = plain_proxy_requests(entry, REQUESTS)
    check_answers(core, listener, answers, mark)
    check("close 1000" not in c.output(), f"{core} saw our close first:\n{c.output()[-2000:]}")


@suite.test
def xray_ws_client_as_plain_http_proxy_loses_no_answer():
    real_client("xray", "ws")


@suite.test
def xray_ws_early_data_client_as_plain_http_proxy_loses_no_answer():
    real_client("xray", "wsed")


@suite.test
def v2ray_ws_client_as_plain_http_proxy_loses_no_answer():
    real_client("v2ray", "ws")


@suite.test
def xray_httpupgrade_client_as_plain_http_proxy_loses_no_answer():
    real_client("xray", "up")


# --------------------------------------------------------------------------------------------
# A raw RFC 6455 client

frame = h.ws_frame
read_frame = h.read_ws_frame


def ws_session_after_destination_eof(d: h.Daemon) -> tuple[h.TlsClient, h.Stream, bytes]:
    """A ws session whose destination answered one `Connection: close` request and closed: returns
    the client, its stream and the answer's bytes (the VLESS response header taken off)."""
    c = h.TlsClient(d.port("ws"), timeout=15).handshake()
    s = h.Stream(c.recv, c.send)
    c.send(f"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = s.read_until(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 101"), head)
    payload = h.vless_header(d.uuid, d.target_port) + h.http_request(
        "GET", "/bytes/3000", headers={"Connection": "close"})
    c.send(frame(0x2, payload))
    got = b""

    def complete() -> bool:
        end = got.find(b"\r\n\r\n")
        if end < 0:
            return False
        length = int(h.curl_headers(got[2:end + 4]).get("content-length", "0"))
        return len(got) >= end + 4 + length

    # The answer: the VLESS response header, then the HTTP response, complete (Content-Length).
    while not complete():
        op, data = read_frame(s)
        check(op in (0x0, 0x2), f"a frame of opcode {op} before the answer was complete: {data!r}, "
                                f"after {got[:200]!r}")
        got += data
    return c, s, got[2:]


@suite.test
def destination_eof_leaves_the_websocket_open_until_the_client_closes():
    mark = D.mark()
    c, s, answer = ws_session_after_destination_eof(D)
    check(answer.startswith(b"HTTP/1.1 200"), answer[:80])
    # The destination has closed (Connection: close); the server still reads: a ping gets its
    # pong, and no close frame comes before it.
    D.wait_event("http.request", since=mark, timeout=10, path="/bytes/3000")
    c.send(frame(0x9, b"still-there"))
    op, data = read_frame(s)
    check((op, data) == (0xA, b"still-there"), f"expected the pong, got opcode {op}: {data!r}")
    # The client's close: the server answers 1000 and closes the connection.
    c.send(frame(0x8, struct.pack(">H", 1000)))
    op, data = read_frame(s)
    check(op == 0x8 and data[:2] == struct.pack(">H", 1000), f"close answer: opcode {op} {data!r}")
    check(s.at_eof(), "connection still open after the close handshake")
    c.close()
    e = D.wait_event("vless.session", since=mark, timeout=10, listener="ws")
    check(e["close_reason"] == "upstream_eof", e)
    check(e["bytes_down"] > 3000, e)


@suite.test
def a_client_that_never_closes_gets_the_close_after_close_linger_ms():
    d = make_daemon(linger_ms=300)
    try:
        mark = d.mark()
        c, s, _ = ws_session_after_destination_eof(d)
        t0 = time.monotonic()
        op, data = read_frame(s)  # nothing sent: the next frame is the server's close
        waited = time.monotonic() - t0
        print(f"FIGURE close_after_linger_300ms_s = {waited:.3f}", flush=True)
        check(op == 0x8 and data[:2] == struct.pack(">H", 1000), f"opcode {op} {data!r}")
        c.close()
        e = d.wait_event("vless.session", since=mark, timeout=10, listener="ws")
        check(e["close_reason"] == "upstream_eof", e)
    finally:
        d.stop()


@suite.test
def close_linger_0_closes_at_once_as_before():
    d = make_daemon(linger_ms=0)
    try:
        c, s, _ = ws_session_after_destination_eof(d)
        # The close frame follows the answer with nothing else asked for.
        op, data = read_frame(s)
        check(op == 0x8, f"opcode {op} {data!r}")
        c.close()
    finally:
        d.stop()


@suite.test
def sigterm_ends_a_linger_at_once():
    # A linger longer than the drain: a drain that did not end lingers would wait its whole deadline.
    d = make_daemon(linger_ms=60000, drain_ms=30000)
    mark = d.mark()
    c, s, _ = ws_session_after_destination_eof(d)
    c.send(frame(0x9, b"x"))
    check(read_frame(s)[0] == 0xA, "no pong")  # lingering now
    t0 = time.monotonic()
    rc = d.stop(timeout=25)
    took = time.monotonic() - t0
    print(f"FIGURE sigterm_with_a_lingering_ws_session_s = {took:.3f}", flush=True)
    # The promise is "at once", far inside the 30 s drain deadline: 15 s is generous.
    check(rc == 0 and took < 15, f"rc {rc} after {took:.1f}s")
    op, _ = read_frame(s)
    check(op == 0x8, f"opcode {op}: the drain's close frame")
    c.close()
    e = next(e for e in h.read_events(d.access) if e.get("event") == "vless.session")
    check(e["close_reason"] == "upstream_eof", e)


if __name__ == "__main__":
    suite.run()
