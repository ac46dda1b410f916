#!/usr/bin/env python3
"""sing-mux (issue 29 item 3): sing-box 1.11 (`multiplex`) and mihomo 1.19 (`smux:`) with each stream
protocol the daemon serves (smux, yamux, h2mux) over raw TLS, one core at a time, through the entries users have:

- plain HTTP proxy and CONNECT GETs, each answer's X-Vlessbench-Route naming a sub (`sub=N`) of a VLESS
  session whose vless.session line says `sing_mux` = the protocol, and the vless.sub lines naming it;
- several streams at once in that one session (concurrent CONNECT tunnels, held open together);
- SOCKS5 UDP: echoes of the [[udp_target]] and DNS queries of the [[dns]] responder, each naming a sub;
- a bulk echo both ways through SOCKS5 (16 MiB, 4 MiB under the sanitizers) with matching SHA-256.

Also: sing-box with padding on (smux and h2mux), sing-box yamux over WebSocket, and hostile sing-mux
sessions from a raw TLS client (an unknown version, a yamux stream past its window, a stream flood past
max_mux_subs; for h2mux a bad HTTP/2 preface, a stream without a valid destination, a GET instead of
CONNECT, streams past SETTINGS_MAX_CONCURRENT_STREAMS, a rapid-reset flood), each refused with its reason
while the daemon keeps serving. The cores are found as ../shared/peers/README.md says (harness/peers.py); a missing one is a SKIP
naming it (docs/sessions.md "sing-mux")."""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import socket
import struct
import subprocess
import threading
import time

import harness as h
from harness import peers
from harness import LOOPBACK, check

suite = h.Suite("test_sing_mux")
h.require_binary()
COUNT = int(os.environ.get("VLESSBENCH_SING_MUX_COUNT") or 5)
# VLESSBENCH_SING_MUX_BULK: bytes each way (by hand: 1073741824, the figures in docs/sessions.md "sing-mux").
BULK = int(os.environ.get("VLESSBENCH_SING_MUX_BULK") or ((4 << 20) if h.SANITIZED else (16 << 20)))
CONCURRENT = 4
MAX_SUBS = 8
USER = "tester"
UUID = h.new_uuid()
D = h.Daemon({
    "users": [{"name": USER, "uuid": UUID}],
    "vless": [{"name": "tls", "listen": h.ANY_PORT}, {"name": "ws", "listen": h.ANY_PORT, "transport": "ws",
                                                      "path": "/ws"},
              # The QUICKACK twin of "tls", for bench/sing_mux_latency.py's second ACK policy.
              {"name": "quick", "listen": h.ANY_PORT, "tcp": h.policy(True, "on")}],
    "target": [{"name": "http", "listen": h.ANY_PORT}],
    "udp_target": [{"name": "echo", "listen": h.ANY_PORT}],
    "dns": [{"name": "dns", "listen": h.ANY_PORT}],
}, limits={"max_mux_subs": MAX_SUBS})
ECHO = h.EchoServer()
LINKS: str | None = None


def links() -> str:
    global LINKS
    if LINKS is None:
        r = subprocess.run([str(h.DAEMON), "links", "-c", str(D.config_path), "--ports-file", str(D.ports_path),
                            "--no-qr"], capture_output=True,
                           text=True, timeout=30)
        check(r.returncode == 0, r.stderr)
        LINKS = r.stdout
    return LINKS


def core_config(core: str, listener: str, protocol: str, entry: int, socks: int, padding: bool = False):
    """(config text, suffix): the core's mixed/socks entries -> the daemon's listener with multiplex on, one
    connection for every stream (so all of them are subs of one session): peers.core_config's, multiplex added."""
    text, suffix = peers.core_config(core, links(), f"{listener}-{USER}", entry, socks)
    if core == "sing-box":
        cfg = json.loads(text)
        cfg["outbounds"][0]["multiplex"] = {"enabled": True, "protocol": protocol, "max_connections": 1,
                                            "min_streams": 4, "padding": padding}
        return json.dumps(cfg, indent=2), suffix
    # mihomo: the smux keys go inside its entry under proxies:, before rules:.
    head, rules = text.split("rules:\n", 1)
    second = head.split("proxies:\n", 1)[1].splitlines()[1]
    indent = " " * (len(second) - len(second.lstrip()))
    head += (f"{indent}smux:\n{indent}  enabled: true\n{indent}  protocol: {protocol}\n"
             f"{indent}  max-connections: 1\n{indent}  min-streams: 4\n"
             f"{indent}  padding: {'true' if padding else 'false'}\n")
    return head + "rules:\n" + rules, suffix


class Core:
    """A core with multiplex on, its entries' ports."""

    def __init__(self, core: str, listener: str, protocol: str, padding: bool = False):
        self.entry, self.socks = peers.inbound_port(), peers.inbound_port()
        while self.socks == self.entry:
            self.socks = peers.inbound_port()
        text, suffix = core_config(core, listener, protocol, self.entry, self.socks, padding)
        self.core = peers.Core(core, text, [self.entry, self.socks], suffix=suffix)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.core.stop()
        return False


def route_of(answer: str) -> str:
    return next((line.split(":", 1)[1].strip() for line in answer.splitlines()
                 if line.lower().startswith("x-vlessbench-route:")), "")


def sub_route(route: str, what: str) -> tuple[int, int]:
    """(session, sub) of a route that must name a sub."""
    fields = h.parse_route(route)
    check(fields["route"] == "vless" and fields.get("sub") is not None,
          f"{what}: not a sub of a VLESS session: {route!r}")
    return int(fields["session"]), int(fields["sub"])


def curl_get(entry: int, connect: bool, path: str = "/generate_204") -> str:
    url = f"http://{LOOPBACK}:{D.port('http')}{path}"
    args = ["-s", "-D", "-", "-o", "/dev/null", "--max-time", "10", "-x", f"http://{LOOPBACK}:{entry}"]
    r = subprocess.run([h.CURL, *args, *(["-p"] if connect else []), url], capture_output=True, timeout=20)
    head = r.stdout.decode(errors="replace")
    answer = head.split("\r\n\r\n")[-2] if connect and head.count("\r\n\r\n") >= 2 else head
    check(" 20" in answer.split("\r\n", 1)[0], f"{'CONNECT' if connect else 'plain'} GET: {answer[:200]!r} "
                                                f"(curl rc {r.returncode})")
    return route_of(answer)


def ready_through(entry: int, timeout: float = 10.0) -> None:
    """The first GET through a core's entry, retried until answered (mihomo answers its very first with a
    502 now and then before it has dialled: test_cores.py's ready_through)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            curl_get(entry, False)
            return
        except AssertionError:
            check(time.monotonic() < deadline, f"no answer through entry {entry} within {timeout}s")
            time.sleep(0.1)


def connect_tunnel(entry: int) -> socket.socket:
    s = socket.create_connection((LOOPBACK, entry), timeout=10)
    s.sendall(f"CONNECT {LOOPBACK}:{D.port('http')} HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        check(chunk, f"CONNECT cut: {head!r}")
        head += chunk
    check(b" 200" in head.split(b"\r\n", 1)[0], head)
    return s


def read_answer(s: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        check(chunk, f"answer cut: {data!r}")
        data += chunk
    return data.split(b"\r\n\r\n", 1)[0].decode(errors="replace")


def concurrent_streams(entry: int) -> list[tuple[int, int]]:
    """CONCURRENT CONNECT tunnels opened together, each answered while all are open: their (session, sub)."""
    tunnels = [connect_tunnel(entry) for _ in range(CONCURRENT)]
    try:
        for t in tunnels:
            t.sendall(h.http_request("GET", "/generate_204"))
        return [sub_route(route_of(read_answer(t)), "concurrent GET") for t in tunnels]
    finally:
        for t in tunnels:
            t.close()


def udp_checks(socks: int) -> list[tuple[int, int]]:
    ctl, relay = peers.socks5_udp_associate(socks)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    out = []
    try:
        echo_head = peers.socks5_udp_header(D.port("echo"))
        dns_head = peers.socks5_udp_header(D.port("dns"))
        for i in range(COUNT):
            payload = b"s%03d" % i
            u.sendto(echo_head + h.echo_datagram(payload), relay)
            body, _, route = h.udp_echo_trailer(_recv_payload(u))
            check(body == payload, f"echo {i}: payload changed")
            out.append(sub_route(route, "UDP echo"))
            u.sendto(dns_head + h.dns_query(0x5100 + i, f"m{i}.vlessbench.test"), relay)
            out.append(sub_route(_dns_route(_recv_payload(u)), "DNS"))
    finally:
        u.close()
        ctl.close()
    return out


def _recv_payload(u: socket.socket) -> bytes:
    data, _ = u.recvfrom(65535)
    check(data[:3] == b"\0\0\0", data[:16])
    atyp = data[3]
    return data[4 + (4 if atyp == 1 else 16 if atyp == 4 else 1 + data[4]) + 2:]


def _dns_route(answer: bytes) -> str:
    marker = b"VLESSBENCH-DNS "
    at = answer.find(marker)
    check(at > 0, f"no route TXT in the DNS answer: {answer!r}")
    text = answer[at:at + answer[at - 1]].decode()
    return text.partition(" ")[2].partition(" ")[2]


def bulk_echo(socks: int) -> tuple[str, str, int]:
    """BULK bytes up through the core's SOCKS5 entry to the echo server and the same back: (sha256 sent,
    sha256 received, bytes received)."""
    s = h.socks5_connect(socks, ECHO.port)
    sent = hashlib.sha256()
    block = os.urandom(1 << 16)

    def send():
        for i in range(BULK // len(block)):
            chunk = hashlib.sha256(block + b"%d" % i).digest() * (len(block) // 32)
            sent.update(chunk)
            s.sendall(chunk)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    got = hashlib.sha256()
    n = 0
    with s:
        while n < BULK:
            chunk = s.recv(min(1 << 18, BULK - n))
            if not chunk:
                break
            got.update(chunk)
            n += len(chunk)
        t.join(30)
    return sent.hexdigest(), got.hexdigest(), n


def run_core(core: str, protocol: str, listener: str = "tls", padding: bool = False, bulk: bool = True) -> None:
    peers.require(core)
    mark = D.mark()
    with Core(core, listener, protocol, padding) as c:
        try:
            ready_through(c.entry)
            routes = [sub_route(curl_get(c.entry, i % 2 == 1), "GET") for i in range(2 * COUNT)]
            together = concurrent_streams(c.entry)
            routes += together + udp_checks(c.socks)
            if bulk:
                t0 = time.monotonic()
                up, down, n = bulk_echo(c.socks)
                print(f"FIGURE {core}_{protocol}_bulk_echo_mib_s = {2 * BULK / (1 << 20) / (time.monotonic() - t0):.1f}",
                      flush=True)
                check(n == BULK and up == down, f"bulk echo: {n} of {BULK} bytes back, sha256 {up} sent, {down} back")
        except Exception as e:  # noqa: BLE001 - with the core's output
            raise AssertionError(f"{core} {protocol} over {listener}: {e}\n--- {core} output ---\n"
                                 f"{c.core.output()[-1500:]}") from None
    # The streams held open together are subs of one session, each its own sub.
    check(len({s for s, _ in together}) == 1 and len({n for _, n in together}) == CONCURRENT, together)
    # Every session an answer named has its vless.session line, sing-mux with this protocol, on this listener;
    # every sub an answer named has its vless.sub line naming that session.
    sessions = {s for s, _ in routes}
    lines = {}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = {e["session"]: e for e in D.events("vless.session", since=mark, listener=listener)}
        if sessions <= set(lines):
            break
        time.sleep(0.1)
    check(sessions <= set(lines), f"sessions {sorted(sessions - set(lines))} have no vless.session line")
    for sid in sessions:
        e = lines[sid]
        check(e.get("sing_mux") == protocol and e.get("cmd") == "mux" and e.get("subs", 0) >= 1, e)
    subs = {(e["session"], e["sub"]) for e in D.events("vless.sub", since=mark)}
    check(set(routes) <= subs, f"subs named by answers without a vless.sub line: {sorted(set(routes) - subs)[:5]}")
    print(f"FIGURE {core}_{protocol}_{listener} = {len(routes)} answers, {len(sessions)} session(s), "
          f"{len(set(routes))} subs", flush=True)


@suite.test
def sing_box_smux():
    run_core("sing-box", "smux")


@suite.test
def sing_box_yamux():
    run_core("sing-box", "yamux")


@suite.test
def mihomo_smux():
    run_core("mihomo", "smux")


@suite.test
def mihomo_yamux():
    run_core("mihomo", "yamux")


@suite.test
def sing_box_smux_padding():
    run_core("sing-box", "smux", padding=True, bulk=False)


@suite.test
def sing_box_yamux_over_ws():
    run_core("sing-box", "yamux", listener="ws", bulk=False)


@suite.test
def sing_box_h2mux():
    run_core("sing-box", "h2mux")


@suite.test
def mihomo_h2mux():
    run_core("mihomo", "h2mux")


@suite.test
def h2mux_streams_closed_by_reset_keep_their_session():
    """Go's HTTP/2 client closes every h2mux stream with RST_STREAM CANCEL: 300 tunnels opened and closed one
    after the other through each core (past the rapid-reset burst of 200, faster than its 50 a second) are
    300 subs of one session that ends as the client closes it, not with ENHANCE_YOUR_CALM (the daemon
    counted such closes as rapid resets before)."""
    for core in ("sing-box", "mihomo"):
        peers.require(core)
        mark = D.mark()
        with Core(core, "tls", "h2mux") as c:
            ready_through(c.entry)
            t0 = time.monotonic()
            routes = []
            for _ in range(300):
                with connect_tunnel(c.entry) as t:
                    t.sendall(h.http_request("GET", "/generate_204"))
                    routes.append(sub_route(route_of(read_answer(t)), "GET"))
            rate = 300 / (time.monotonic() - t0)
        check(len({s for s, _ in routes}) == 1, f"{core}: answers from sessions {sorted({s for s, _ in routes})}")
        e = D.wait_event("vless.session", since=mark, timeout=15, session=routes[0][0])
        check(e.get("mux_error") is None and e["subs"] >= 301, e)
        print(f"FIGURE {core}_h2mux_streams_per_s = {rate:.0f} (300 streams, 1 session, close {e['close_reason']})",
              flush=True)


@suite.test
def sing_box_h2mux_padding():
    run_core("sing-box", "h2mux", padding=True, bulk=False)


def raw_session(payload: bytes) -> h.TlsClient:
    t = h.TlsClient(D.port("tls")).handshake()
    t.send(h.vless_header(UUID, 444, addr="sp.mux.sing-box.arpa") + payload)
    return t


def yamux(typ: int, flags: int, sid: int, length: int, data: bytes = b"") -> bytes:
    return struct.pack(">BBHII", 0, typ, flags, sid, length) + data


def drain(t: h.TlsClient) -> bytes:
    out = b""
    for _ in range(10_000):
        chunk = t.recv()
        if not chunk:
            return out
        out += chunk
    raise AssertionError("the daemon did not close a refused sing-mux session")


@suite.test
def hostile_sessions_refused_with_reasons():
    """An unknown version, a yamux stream past its 256 KiB window, and a flood of streams past max_mux_subs."""
    mark = D.mark()
    drain(raw_session(b"\x07\x00"))
    D.wait_event("vless.session", since=mark, timeout=10, mux_error="unknown_version", close_reason="mux_error")
    mark = D.mark()
    request = struct.pack(">H", 0) + b"\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", ECHO.port)
    # 100 KiB (credited only at 128 KiB), then 156 KiB + 1: one byte past the 256 KiB window.
    first = request + b"w" * ((100 << 10) - len(request))
    over = b"w" * ((156 << 10) + 1)
    t = raw_session(b"\x00\x01" + yamux(1, 1, 1, 0) + yamux(0, 0, 1, len(first), first) + yamux(0, 0, 1, len(over), over))
    drain(t)
    D.wait_event("vless.session", since=mark, timeout=10, mux_error="window_exceeded", close_reason="mux_error")
    mark = D.mark()
    flood = b"".join(yamux(1, 1, sid, 0) + yamux(0, 0, sid, len(request), request)
                     for sid in range(1, 2 * (MAX_SUBS + 4), 2))
    t = raw_session(b"\x00\x01" + flood)
    refused = []
    deadline = time.monotonic() + 10
    while len(refused) < 4 and time.monotonic() < deadline:
        refused = D.events("vless.sub", since=mark, error="too_many_streams")
        time.sleep(0.05)
    t.sock.close()
    check(len(refused) == 4 and all(e["close_reason"] == "rejected" for e in refused), refused)
    e = D.wait_event("vless.session", since=mark, timeout=10, sing_mux="yamux")
    check(e["subs"] == MAX_SUBS and e["subs_refused"] >= 4, e)
    # And the daemon serves on.
    check(h.vless_get(D.port("tls"), UUID, D.port("http"))[0].status == 200, "a plain session after the hostile ones")


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# HPACK, literal fields without indexing, names from the static table: :method (2) CONNECT, :authority (1)
# localhost, what Go's HTTP/2 client sends for sing-mux's h2mux streams.
H2_CONNECT = b"\x02\x07CONNECT\x01\x09localhost"
H2_GET = b"\x82\x84\x87\x01\x09localhost"  # indexed :method GET, :path /, :scheme https


def h2(typ: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([typ, flags]) + struct.pack(">I", sid) + payload


def h2_frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream, payload) of every whole frame in data."""
    out, at = [], 0
    while at + 9 <= len(data):
        n = int.from_bytes(data[at:at + 3], "big")
        if at + 9 + n > len(data):
            break
        out.append((data[at + 3], data[at + 4], int.from_bytes(data[at + 5:at + 9], "big") & 0x7fffffff,
                    data[at + 9:at + 9 + n]))
        at += 9 + n
    return out


def h2_read_until(t: h.TlsClient, done, timeout: float = 10.0) -> list[tuple[int, int, int, bytes]]:
    """The daemon's frames (after the VLESS response header) until done(frames) or EOF, within timeout."""
    data = b""
    deadline = time.monotonic() + timeout
    t.sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            chunk = t.recv()
        except (socket.timeout, TimeoutError):
            continue
        if not chunk:
            break
        data += chunk
        if len(data) > 2 and done(h2_frames(data[2:])):
            break
    check(data[:2] == b"\x00\x00", f"no VLESS response header: {data[:16]!r}")
    return h2_frames(data[2:])


@suite.test
def hostile_h2mux_refused_with_reasons():
    """A bad HTTP/2 preface ends the session; a stream without a valid destination and a GET are refused
    stream by stream while a good stream beside them is served; streams past SETTINGS_MAX_CONCURRENT_STREAMS
    (max_mux_subs) and a rapid-reset flood end the connection with their reasons."""
    mark = D.mark()
    drain(raw_session(b"\x00\x02GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    D.wait_event("vless.session", since=mark, timeout=10, mux_error="h2_bad_preface", close_reason="mux_error")

    mark = D.mark()
    good = struct.pack(">H", 0) + b"\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", ECHO.port)
    bad = struct.pack(">H", 0) + b"\x09" + b"\x00" * 6  # address type 9
    t = raw_session(b"\x00\x02" + H2_PREFACE + h2(4, 0, 0) + h2(4, 1, 0)
                    + h2(1, 4, 1, H2_CONNECT) + h2(0, 0, 1, bad)
                    + h2(1, 4, 3, H2_CONNECT) + h2(0, 0, 3, good + b"ping-h2mux")
                    + h2(1, 5, 5, H2_GET))

    def answered(frames) -> bool:
        data1 = b"".join(p for typ, _, sid, p in frames if typ == 0 and sid == 1)
        data3 = b"".join(p for typ, _, sid, p in frames if typ == 0 and sid == 3)
        return b"unknown_address_type" in data1 and data3 == b"\x00ping-h2mux" and any(
            typ == 1 and sid == 5 for typ, _, sid, _ in frames)

    frames = h2_read_until(t, answered)
    check(answered(frames), f"frames: {[(typ, fl, sid, p[:40]) for typ, fl, sid, p in frames]}")
    # The refused stream: status 1 and the reason, then END_STREAM; the GET: a HEADERS frame ending its stream.
    check(any(typ == 0 and sid == 1 and fl & 1 for typ, fl, sid, _ in frames), "refused stream 1 not ended")
    check(any(typ == 1 and sid == 5 and fl & 1 for typ, fl, sid, _ in frames), "GET stream 5 not answered")
    t.sock.close()
    refused = {}
    deadline = time.monotonic() + 10
    while len(refused) < 2 and time.monotonic() < deadline:
        refused = {e["error"]: e for e in D.events("vless.sub", since=mark, close_reason="rejected")}
        time.sleep(0.05)
    check(set(refused) == {"unknown_address_type", "h2mux_not_connect"}, refused)
    check(refused["h2mux_not_connect"]["detail"] == "sing-mux h2mux stream 5: GET", refused["h2mux_not_connect"])
    e = D.wait_event("vless.session", since=mark, timeout=10, sing_mux="h2mux")
    check(e["subs"] == 1 and e["subs_refused"] == 2, e)

    # More streams at once than max_mux_subs (our SETTINGS acknowledged, so nghttp2 holds to it): the
    # connection ends with a protocol error.
    mark = D.mark()
    flood = b"".join(h2(1, 4, sid, H2_CONNECT) for sid in range(1, 2 * (MAX_SUBS + 4), 2))
    t = raw_session(b"\x00\x02" + H2_PREFACE + h2(4, 0, 0) + h2(4, 1, 0) + flood)
    frames = h2_read_until(t, lambda fr: any(typ == 7 for typ, *_ in fr))
    t.sock.close()
    check(any(typ == 7 for typ, *_ in frames), "no GOAWAY for a flood past SETTINGS_MAX_CONCURRENT_STREAMS")
    e = D.wait_event("vless.session", since=mark, timeout=10, sing_mux="h2mux")
    check(e["close_reason"] == "mux_error" and e["mux_error"].startswith("h2_"), e)
    print(f"FIGURE h2mux_stream_flood = {e['mux_error']}", flush=True)

    # Rapid reset (CVE-2023-44487): 300 streams opened and reset at once, past the 200 burst.
    mark = D.mark()
    resets = b"".join(h2(1, 4, sid, H2_CONNECT) + h2(3, 0, sid, struct.pack(">I", 8)) for sid in range(1, 601, 2))
    t = raw_session(b"\x00\x02" + H2_PREFACE + h2(4, 0, 0) + h2(4, 1, 0) + resets)
    frames = h2_read_until(t, lambda fr: any(typ == 7 for typ, *_ in fr))
    t.sock.close()
    goaway = [p for typ, _, _, p in frames if typ == 7]
    check(goaway and int.from_bytes(goaway[0][4:8], "big") == 0xb, f"GOAWAY ENHANCE_YOUR_CALM expected: {goaway}")
    e = D.wait_event("vless.session", since=mark, timeout=10, sing_mux="h2mux")
    check(e["close_reason"] == "mux_error" and "ENHANCE_YOUR_CALM" in e["mux_error"], e)
    # And the daemon serves on.
    check(h.vless_get(D.port("tls"), UUID, D.port("http"))[0].status == 200, "a plain session after the hostile ones")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        ECHO.stop()
        D.stop()
