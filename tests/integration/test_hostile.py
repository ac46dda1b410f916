"""Hostile clients against the real daemon: each one ends with a reason in the log, none holds a
session past its deadline, none disturbs the other sessions. The single-shot bad headers (wrong
UUID, bad version, unknown command/address type, port 0, flow, TLS garbage, silent clients) live
in test_vless_reject.py and the HTTP parser's error paths in test_target.py; this suite adds the
sweeps, the timing, the slow and the never-reading clients, renegotiation and the destination
policy. Every loop is bounded in count and time; everything stays on 127.0.0.1 / ::1.
~700 lines: all cases share one daemon (D below), which keeps the suite fast and shows that no
case disturbs the sessions of the others.
"""
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

from harness import (ANY_PORT, ATYP_DOMAIN, ATYP_V4, SANITIZED, Daemon, Suite, TlsClient, check, http_request,
                     private_hosts_prefix, rss_kib,
                     median_ms, new_uuid, plain_stream, read_vless_response_header, require_binary, spawn,
                     route_session, stop_process, tcp_connect, vless_get, vless_header, wait_sender_stalled,
                     wait_server_read)

suite = Suite("test_hostile")
require_binary()

UUID = new_uuid()
HANDSHAKE_MS, HEADER_MS, IDLE_MS = 1500, 1000, 3000
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT}],
}, limits={"handshake_timeout_ms": HANDSHAKE_MS, "header_timeout_ms": HEADER_MS, "connect_timeout_ms": 2000,
           "idle_timeout_ms": IDLE_MS})
VP = D.port("edge")
TP = D.port("http")
# The start-up probe (connect, close) is a handshake reject of its own: let it land before any mark.
D.wait_event("vless.reject", reason="tls_handshake_failed")
RNG = random.Random(int(os.environ.get("VLESSBENCH_HOSTILE_SEED", "6")))  # reproducible sweeps
GET = http_request("GET", "/", headers={"Connection": "close"})
# Slower under ASan+UBSan: deadlines are checked against wider windows there.
SLACK = 3.0 if SANITIZED else 1.0


def hdr(**kw) -> bytes:
    kw.setdefault("user_uuid", UUID)
    kw.setdefault("port", TP)
    return vless_header(**kw)


def healthy():
    """One good session; returns its latency once its log line is written (so later marks skip it)."""
    resp, dt = vless_get(VP, UUID, TP, "/")
    route = resp.headers.get("x-vlessbench-route", "")
    check(resp.status == 200 and route.startswith("vless session="), resp)
    D.wait_event("vless.session", session=route_session(route))
    return dt


def drain(sock_or_stream, limit=1 << 20):
    """Reads until EOF (or reset); bounded by the socket timeout."""
    try:
        if isinstance(sock_or_stream, socket.socket):
            while sock_or_stream.recv(65536):
                pass
        else:
            sock_or_stream.read_to_eof(limit=limit)
    except (ConnectionResetError, socket.timeout, ssl.SSLError):
        pass


def closing_events(since: int) -> list[dict]:
    return D.events("vless.reject", since=since) + D.events("vless.session", since=since)


def wait_closed(since: int, count: int = 1, timeout: float = 5.0) -> list[dict]:
    """The first count vless.reject / vless.session lines after since (every session writes one)."""
    deadline = time.monotonic() + timeout
    while True:
        ev = closing_events(since)
        if len(ev) >= count:
            return ev
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(ev)} of {count} sessions logged within {timeout}s: {ev[-5:]}")
        time.sleep(0.02)



# ---------------------------------------------------------------------------------------------
# Random bytes


@suite.test
def random_bytes_before_tls():
    # Some start like a TLS handshake record so the parser gets past the first byte.
    trials = 24
    mark = D.mark()
    for i in range(trials):
        n = RNG.randrange(1, 3000)
        junk = RNG.randbytes(n)
        if i % 3 == 0:
            junk = b"\x16\x03\x01" + RNG.randbytes(2) + junk
        elif i % 3 == 1:
            junk = b"\x16\x03\x03\x00\x40\x01" + junk  # a ClientHello record header, then noise
        with tcp_connect(VP, timeout=5) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass
            drain(s)
    ev = wait_closed(mark, trials)
    check(all(e["event"] == "vless.reject" for e in ev), [e for e in ev if e["event"] != "vless.reject"])
    reasons = {e["reason"] for e in ev}
    check(reasons <= {"tls_handshake_failed"}, reasons)
    check(all(e["phase"] == "tls" for e in ev), ev)
    healthy()


@suite.test
def random_bytes_after_tls():
    # After the handshake: random junk, then junk behind ever longer valid prefixes (version; version
    # and user; version, user and empty addons; all but the address). Whatever it parses as, the
    # session ends with one log line, and a random destination is never dialled (the destination
    # policy refuses it first).
    trials = 50
    valid = hdr()
    prefixes = [b"", valid[:1], valid[:17], valid[:18], valid[:22]]
    mark = D.mark()
    for i in range(trials):
        junk = prefixes[i % len(prefixes)] + RNG.randbytes(RNG.randrange(1, 4096))
        with TlsClient(VP) as c:
            c.handshake()
            c.send(junk)
            c.close_notify()
            drain(c.stream)
    ev = wait_closed(mark, trials)
    sessions = [e for e in ev if e["event"] == "vless.session"]
    # A session only if the junk happened to name a loopback or own destination.
    for e in sessions:
        check(e["dest"].startswith(("127.", "[::1]")), e)
    reasons = {e["reason"] for e in ev if e["event"] == "vless.reject"}
    print(f"  random after TLS: reasons {sorted(reasons)}, sessions {[e['dest'] for e in sessions]}")
    odd = [e for e in ev if e.get("phase") == "tls"]
    check(not odd, odd)
    check({"bad_version", "bad_addons"} <= reasons, reasons)
    check(reasons & {"bad_address_type", "bad_command", "dest_not_allowed", "connect_failed", "bad_port", "bad_domain",
                     "empty_domain", "mux_unsupported"}, reasons)
    healthy()


# ---------------------------------------------------------------------------------------------
# Truncated and oversized headers


@suite.test
def every_truncation_of_a_valid_header():
    seed_addon = bytes([0x12, 0x02, 0xAB, 0xCD])  # addons field 2 (seed): valid, no flow
    headers = [hdr(), hdr(addr="localhost", atyp=ATYP_DOMAIN, addons=seed_addon), hdr(addr="::1", port=TP)]
    total = 0
    for full in headers:
        for k in range(len(full)):
            # close_notify for most; a bare TCP FIN (no close_notify) for every third
            mark = D.mark()
            with TlsClient(VP) as c:
                c.handshake()
                if k:
                    c.send(full[:k])
                if k % 3 == 2:
                    c.sock.shutdown(socket.SHUT_WR)
                else:
                    c.close_notify()
                drain(c.stream)
            e = D.wait_event("vless.reject", since=mark, timeout=5)
            want = "no_header" if k == 0 else "truncated_header"
            check(e["reason"] == want and e["bytes_seen"] == k and e["phase"] == "header", (k, e))
            total += 1
    print(f"  {total} truncations, each rejected with its byte count")
    healthy()


@suite.test
def oversized_domain_length():
    mark = D.mark()
    # A 255-byte name (the field's maximum) is not a DNS name: refused before the resolver sees it.
    long_name = "a" * 255
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr(addr=long_name, atyp=ATYP_DOMAIN) + GET)
        drain(c.stream)
    e = D.wait_event("vless.reject", since=mark)
    check(e["reason"] == "bad_domain", e)
    # A 64-byte label is just as invalid.
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr(addr="b" * 64 + ".example", atyp=ATYP_DOMAIN) + GET)
        drain(c.stream)
    check(D.wait_event("vless.reject", since=mark)["reason"] == "bad_domain")
    # A length byte promising more than ever comes: cut at the header deadline.
    mark = D.mark()
    t0 = time.monotonic()
    with TlsClient(VP, timeout=10) as c:
        c.handshake()
        partial = hdr(addr="x" * 200, atyp=ATYP_DOMAIN)[:-190]
        c.send(partial)
        drain(c.stream)
    dt = time.monotonic() - t0
    e = D.wait_event("vless.reject", since=mark)
    check(e["reason"] == "header_timeout" and e["bytes_seen"] == len(partial), e)
    check(dt < HEADER_MS / 1000 + SLACK, f"held {dt:.2f}s")
    healthy()


@suite.test
def command_and_address_type_sweep():
    # Beyond test_vless_reject's single cases: every command and address type byte outside the spec.
    mark = D.mark()
    cases = [(cmd, ATYP_V4) for cmd in (0, 4, 5, 0x7F, 0xFF)] + [(1, atyp) for atyp in (0, 4, 5, 0x7F, 0xFF)]
    for cmd, atyp in cases:
        payload = hdr(cmd=cmd) if atyp == ATYP_V4 else hdr(atyp=atyp) + b"\x7f\x00\x00\x01"
        with TlsClient(VP) as c:
            c.handshake()
            c.send(payload + GET)
            drain(c.stream)
    ev = wait_closed(mark, len(cases))
    reasons = [e.get("reason") for e in ev]
    check(reasons.count("bad_command") == 5 and reasons.count("bad_address_type") == 5, reasons)
    # Port 0 in every address form.
    mark = D.mark()
    for addr in ("127.0.0.1", "::1", "localhost"):
        with TlsClient(VP) as c:
            c.handshake()
            c.send(hdr(addr=addr, port=0) + GET)
            drain(c.stream)
    ev = wait_closed(mark, 3)
    check([e.get("reason") for e in ev] == ["bad_port"] * 3, ev)
    healthy()


# ---------------------------------------------------------------------------------------------
# Timing


@suite.test
def wrong_uuid_timing():
    # Time from sending the header to the server's close: unknown user vs a known user with a bad
    # command. Both are rejects after the same parse; the UUID compare is constant-time and the
    # lookup walks every user, so the two must not differ to speak of.
    n = 200

    def once(payload: bytes) -> float:
        with TlsClient(VP) as c:
            c.handshake()
            t0 = time.perf_counter()
            c.send(payload)
            drain(c.stream)
            return time.perf_counter() - t0

    wrong, right = [], []
    bad_cmd = hdr(cmd=9) + GET
    for i in range(n):
        # Interleaved so drift in machine load hits both alike.
        if i % 2:
            wrong.append(once(hdr(user_uuid=new_uuid()) + GET))
            right.append(once(bad_cmd))
        else:
            right.append(once(bad_cmd))
            wrong.append(once(hdr(user_uuid=new_uuid()) + GET))
    mw, mr = median_ms(wrong), median_ms(right)
    print(f"  median close after header: wrong UUID {mw:.3f} ms, right UUID + bad command {mr:.3f} ms "
          f"(n={n} each)")
    check(abs(mw - mr) < max(1.0, 0.5 * min(mw, mr)), f"wrong {mw:.3f} ms vs right {mr:.3f} ms")


# ---------------------------------------------------------------------------------------------
# TLS renegotiation


def renegotiate(payload: bytes, relaying: bool = False) -> tuple[int, str]:
    """openssl s_client (TLS 1.2) sends payload, then asks to renegotiate ('R' command). Each step
    waits for its evidence: the handshake's session summary in s_client's output; with relaying,
    the own target having read the relayed request (the session is past its header); and
    s_client's RENEGOTIATING before the byte that drives the renegotiation if 'R' alone did not."""
    openssl = shutil.which("openssl")
    check(openssl, "openssl CLI not found")
    p = spawn([openssl, "s_client", "-connect", f"127.0.0.1:{VP}", "-tls1_2", "-servername", "localhost",
               "-no_ign_eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = bytearray()
    lock = threading.Lock()

    def read():
        while True:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                return
            with lock:
                out.extend(chunk)

    def wait_out(pred, what: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and p.poll() is None:
            with lock:
                if pred(bytes(out)):
                    return
            time.sleep(0.02)
        with lock:
            check(pred(bytes(out)), f"s_client: no {what}: {bytes(out)[-1500:]!r}")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_out(lambda o: b"SSL-Session:" in o and b"\n---\n" in o[o.find(b"SSL-Session:"):], "handshake")
        if payload:
            p.stdin.write(payload)
            p.stdin.flush()
        if relaying:
            wait_server_read(TP, with_data=1)
        p.stdin.write(b"R\n")
        p.stdin.flush()
        wait_out(lambda o: b"RENEGOTIATING" in o, "RENEGOTIATING")
        p.stdin.write(b"x")  # drives the renegotiation if the 'R' alone did not
        p.stdin.flush()
    except BrokenPipeError:
        pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    rc = stop_process(p, signal.SIGTERM, 2)
    reader.join(timeout=2)
    with lock:
        return rc, bytes(out).decode(errors="replace")


@suite.test
def tls12_renegotiation_refused_before_header():
    mark = D.mark()
    rc, out = renegotiate(b"")
    # Matched by reason: a slow (sanitized) daemon may still log an earlier check's reject after
    # the mark. A renegotiation logged under any other reason times out here and fails.
    e = D.wait_event("vless.reject", since=mark, reason="tls_error")
    print(f"  reject: {e['reason']} ({e.get('detail', '')}); s_client exit {rc}")
    check("RENEGOTIATING" in out, out[-2000:])
    check(e["phase"] == "header" and e["reason"] == "tls_error", e)
    check("renegotiation" in e.get("detail", "").lower(), e)
    healthy()


@suite.test
def tls12_renegotiation_refused_mid_relay():
    mark = D.mark()
    rc, out = renegotiate(hdr() + http_request("GET", "/delay/3000"), relaying=True)
    # The only TLS 1.2 session here (an earlier check's line may still arrive after the mark).
    e = D.wait_event("vless.session", since=mark, timeout=6, pred=lambda ev: ev.get("tls_version") == "TLSv1.2")
    check(e["tls_version"] == "TLSv1.2", e)
    check(e["close_reason"] == "client_error", e)
    check("RENEGOTIATING" in out, out[-2000:])
    # Ended at the attempt, not when the relay was done: the delayed answer never reached s_client.
    check("delayed 3000 ms" not in out, f"renegotiation attempt did not end the session at once: {e}")
    print(f"FIGURE renegotiation_mid_relay_session_ms = {e['duration_us'] / 1000:.0f}")
    healthy()


# ---------------------------------------------------------------------------------------------
# Slow clients


def client_hello() -> bytes:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def dribble(sock: socket.socket, data: bytes, gap: float, budget: float) -> int:
    """Sends data one byte per gap until done, the peer closes, or budget seconds pass."""
    sent = 0
    t_end = time.monotonic() + budget
    for b in data:
        if time.monotonic() > t_end:
            break
        try:
            sock.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += 1
        time.sleep(gap)
    return sent


@suite.test
def slowloris_tls_handshake():
    hello = client_hello()
    mark = D.mark()
    t0 = time.monotonic()
    with tcp_connect(VP, timeout=10) as s:
        sent = dribble(s, hello, 0.05, 10)
        drain(s)
    dt = time.monotonic() - t0
    e = D.wait_event("vless.reject", since=mark)
    check(e["reason"] == "handshake_timeout" and e["phase"] == "tls", e)
    check(sent < len(hello), f"whole ClientHello ({len(hello)} bytes) went through")
    check(e["duration_us"] < (HANDSHAKE_MS / 1000 + SLACK) * 1e6, e)
    print(f"  {sent} of {len(hello)} ClientHello bytes in {dt:.2f}s before the cut")
    healthy()


@suite.test
def slowloris_vless_header():
    # One TLS record per header byte; every byte arrives, yet the header deadline still holds.
    mark = D.mark()
    with TlsClient(VP, timeout=10) as c:
        c.handshake()
        data = hdr() + GET
        t_end = time.monotonic() + 8
        for i in range(len(data)):
            if time.monotonic() > t_end:
                break
            try:
                c.send(data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.1)
        drain(c.stream)
    e = D.wait_event("vless.reject", since=mark)
    check(e["reason"] == "header_timeout" and 0 < e["bytes_seen"] < len(hdr()), e)
    check(e["duration_us"] < (HANDSHAKE_MS + HEADER_MS) / 1000 * 1e6 + SLACK * 1e6, e)
    healthy()


def slow_http_head(stream_send, deadline_s: float):
    head = http_request("GET", "/", headers={"X-Slow": "y" * 100})
    t_end = time.monotonic() + deadline_s
    for i in range(len(head)):
        if time.monotonic() > t_end:
            return i
        try:
            stream_send(head[i:i + 1])
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return i
        time.sleep(0.05)
    return len(head)


@suite.test
def slowloris_http_direct():
    with tcp_connect(TP, timeout=10) as s:
        t0 = time.monotonic()
        sent = slow_http_head(s.sendall, 8)
        st = plain_stream(s)
        closed = st.at_eof()
        dt = time.monotonic() - t0
    check(closed, "slow head not closed")
    check(dt < HEADER_MS / 1000 + SLACK + 0.5, f"slow head held {dt:.2f}s (header_timeout_ms = {HEADER_MS})")
    print(f"  direct: {sent} head bytes in {dt:.2f}s before the cut")
    healthy()


@suite.test
def slowloris_http_through_vless():
    # The relay sees traffic (each byte resets its idle deadline) but the target's header deadline
    # cuts the request, and the session ends with it.
    mark = D.mark()
    with TlsClient(VP, timeout=10) as c:
        c.handshake()
        c.send(hdr())
        t0 = time.monotonic()
        slow_http_head(c.send, 8)
        drain(c.stream)
        dt = time.monotonic() - t0
    e = D.wait_event("vless.session", since=mark, timeout=5)
    check(dt < HEADER_MS / 1000 + SLACK + 0.5, f"slow head through VLESS held {dt:.2f}s")
    check(e["close_reason"] in ("upstream_eof", "upstream_error"), e)
    healthy()


# ---------------------------------------------------------------------------------------------
# Half-open and silent peers


@suite.test
def half_open_fin_in_every_phase():
    # FIN right after connect, right after the handshake (no close_notify): rejects at once. The
    # reasons are the evidence: a FIN not noticed would end at the deadline as handshake_timeout
    # or header_timeout instead.
    mark = D.mark()
    with tcp_connect(VP) as s:
        s.shutdown(socket.SHUT_WR)
        drain(s)
    with TlsClient(VP) as c:
        c.handshake()
        c.sock.shutdown(socket.SHUT_WR)
        drain(c.stream)
    ev = wait_closed(mark, 2)
    check([(e["reason"], e["phase"]) for e in ev] == [("tls_handshake_failed", "tls"), ("no_header", "header")], ev)
    # FIN (no close_notify) after a request whose answer is slow: the answer still arrives.
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr() + http_request("GET", "/delay/300"))
        c.sock.shutdown(socket.SHUT_WR)
        read_vless_response_header(c.stream)
        r = c.stream.read_response()
        check(r.status == 200 and r.body == b"delayed 300 ms\n", r)
    e = D.wait_event("vless.session", since=mark)
    check(e["close_reason"] in ("client_eof", "upstream_eof"), e)


def reset_right_after_connect(port: int, count: int, payload: bytes = b"") -> set[str]:
    """count connections, each reset (SO_LINGER 0) right after connect and payload, while the
    daemon is stopped: every one of them waits in the accept backlog already reset. Returns the
    clients' "ip:port"."""
    clients = set()
    D.signal(signal.SIGSTOP)
    try:
        for _ in range(count):
            s = tcp_connect(port, timeout=2)
            clients.add("%s:%d" % s.getsockname())
            if payload:
                s.sendall(payload)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    finally:
        D.signal(signal.SIGCONT)
    return clients


@suite.test
def reset_right_after_connect_keeps_the_client_address():
    # The client address comes from accept(): once a connection is reset, getpeername() fails,
    # and the log said 0.0.0.0:0 (278 of 300 such connections before).
    n = 100
    mark = D.mark()
    clients = reset_right_after_connect(VP, n)
    ev = wait_closed(mark, n, timeout=10 * SLACK)
    logged = [e["client"] for e in ev]
    check(set(logged) == clients and len(logged) == n,
          f"{sum(c not in clients for c in logged)} of {len(logged)} lines with another client, e.g. "
          f"{[c for c in logged if c not in clients][:3]}")
    check({e["reason"] for e in ev} == {"tls_handshake_failed"}, {e["reason"] for e in ev})
    # The target served a request that arrived before the reset too (it dropped the connection
    # without a line): one http.request line each, with its peer and a route.
    mark = D.mark()
    clients = reset_right_after_connect(TP, n, http_request("GET", "/generate_204"))
    deadline = time.monotonic() + 10 * SLACK
    while len(D.events("http.request", since=mark)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    ev = D.events("http.request", since=mark)
    check({e["peer"] for e in ev} == clients and len(ev) == n, f"{len(ev)} http.request lines for {n} requests")
    check(all(e["route"] == "direct" and e["path"] == "/generate_204" for e in ev), ev[:3])
    healthy()


@suite.test
def silent_peer_mid_relay_is_cut_at_idle_timeout():
    # A client that goes quiet with a keep-alive connection open (neither FIN nor data): the
    # target's keep-alive and the relay are both idle, and the session ends at idle_timeout_ms.
    mark = D.mark()
    with TlsClient(VP, timeout=10) as c:
        c.handshake()
        c.send(hdr() + http_request("GET", "/"))
        read_vless_response_header(c.stream)
        check(c.stream.read_response().status == 200)
        t0 = time.monotonic()
        closed = c.stream.at_eof()
        dt = time.monotonic() - t0
    check(closed, "silent session not closed")
    e = D.wait_event("vless.session", since=mark)
    check(dt < IDLE_MS / 1000 + SLACK + 0.5, f"silent session held {dt:.2f}s (idle_timeout_ms = {IDLE_MS})")
    check(e["close_reason"] in ("timeout", "upstream_eof"), e)


# ---------------------------------------------------------------------------------------------
# Backpressure


@suite.test
def never_reading_clients_keep_memory_bounded():
    pid = D.proc.pid
    healthy()
    base = [healthy() for _ in range(20)]
    rss0 = rss_kib(pid)
    n_stalled = 16
    mark = D.mark()
    stalled = []
    for _ in range(n_stalled):
        c = TlsClient(VP, timeout=10)
        c.handshake()
        # 4 GiB each, never read: only the kernel's socket buffers fill, not the daemon.
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.send(hdr() + http_request("GET", f"/bytes/{4 << 30}"))
        stalled.append(c)
    try:
        wait_sender_stalled(TP)  # the kernel's and the relay's buffers towards the 16 are full
        rss = [rss_kib(pid)]
        during = []
        for _ in range(20):
            during.append(healthy())
        rss.append(rss_kib(pid))
        grow_kb = max(rss) - rss0
        print(f"  RSS {rss0} kB idle, {max(rss)} kB with {n_stalled} stalled 4 GiB downloads "
              f"(+{grow_kb / n_stalled:.0f} kB each); other sessions: median {median_ms(base):.2f} ms before, "
              f"{median_ms(during):.2f} ms during")
        # ASan's quarantine keeps freed memory resident: only the uninstrumented daemon's RSS means much.
        check(SANITIZED or grow_kb < 32 * 1024, f"RSS grew {grow_kb} kB")
        # Under ASan (several times slower, beside fuzz targets in a parallel ctest) the latency is
        # no measure of the daemon: the check is the Release tree's, as for the RSS bound.
        check(SANITIZED or median_ms(during) < max(5 * median_ms(base), median_ms(base) + 20),
              (median_ms(base), median_ms(during)))
        # Stalled sessions are cut once idle_timeout passes without progress.
        t0 = time.monotonic()
        ev = []
        while time.monotonic() - t0 < IDLE_MS / 1000 + 2 + SLACK:
            ev = [e for e in D.events("vless.session", since=mark) if e["bytes_down"] > 1 << 20]
            if len(ev) >= n_stalled:
                break
            time.sleep(0.1)
        check(len(ev) == n_stalled, f"only {len(ev)} of {n_stalled} stalled sessions ended")
        check(all(e["close_reason"] in ("timeout", "upstream_eof", "upstream_error") for e in ev),
              {e["close_reason"] for e in ev})
    finally:
        for c in stalled:
            c.close()
        # Their log lines land before the next test's mark, whatever happened above.
        deadline = time.monotonic() + IDLE_MS / 1000 + 2 + SLACK
        while len(closing_events(mark)) < n_stalled and time.monotonic() < deadline:
            time.sleep(0.05)
    healthy()


# ---------------------------------------------------------------------------------------------
# HTTP smuggling through the relay (the direct shapes are in test_target.py)


@suite.test
def smuggling_through_vless_is_400_and_close():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr() + b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
        read_vless_response_header(c.stream)
        r = c.stream.read_response()
        check(r.status == 400 and r.headers.get("connection") == "close", r)
        check(c.stream.at_eof(), "session still open after a 400")
    check(not D.events("http.request", since=mark, path="/smuggled"), "smuggled request was served")
    sid = route_session(r.headers["x-vlessbench-route"])
    e = D.wait_event("vless.session", session=sid)
    check(e["close_reason"] in ("upstream_eof", "client_eof"), e)


# ---------------------------------------------------------------------------------------------
# Destination policy


def reject_for(dest: str, port: int) -> dict:
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(hdr(addr=dest, port=port) + GET)
        drain(c.stream)
    return D.wait_event("vless.reject", since=mark)


class DialWitness:
    """A listener on 127.0.0.1 that counts the connections it was offered: where a refused
    destination would reach it if the daemon dialled before checking (0.0.0.0 dials 127.0.0.1 on
    Linux; a name that also resolves to 127.0.0.1), the evidence that it did not dial."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def dialled(self) -> int:
        n = 0
        while True:
            try:
                self.sock.accept()[0].close()
                n += 1
            except BlockingIOError:
                return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()


@suite.test
def destination_policy_refuses_other_hosts():
    with DialWitness() as w:
        for dest, port, shown in (("192.0.2.1", 80, "192.0.2.1:80"), ("2001:db8::1", 80, "[2001:db8::1]:80"),
                                  ("::ffff:192.0.2.1", 80, "[::ffff:192.0.2.1]:80"),
                                  ("0.0.0.0", w.port, f"0.0.0.0:{w.port}")):
            e = reject_for(dest, port)
            check(e["reason"] == "dest_not_allowed" and e["dest"] == shown and e["user"] == "alice", e)
            check(e["phase"] == "connect", e)
        # Refused before dialling: the reject line comes after any dial, and 0.0.0.0 would have
        # reached the witness (a dial to TEST-NET first would have ended as connect_failed or a
        # timeout, not dest_not_allowed).
        check(w.dialled() == 0, "a refused destination was dialled")
    healthy()  # loopback and the own target stay reachable


@suite.test
def destination_policy_checks_every_resolved_address():
    # A name is checked after resolution, on every address it resolves to. The names come from an
    # /etc/hosts of the daemon's own (a mount namespace of its own): whatever this machine's host
    # name resolves to (127.0.1.1 on Debian, so the case used to skip itself and pass).
    hosts = ("127.0.0.1 localhost\n"
             "127.0.0.1 near.vlessbench.test\n"
             "192.0.2.1 far.vlessbench.test\n"
             "127.0.0.1 mixed.vlessbench.test\n"
             "192.0.2.9 mixed.vlessbench.test\n")
    d = Daemon({"users": [{"name": "alice", "uuid": UUID}],
                "vless": [{"name": "edge", "listen": ANY_PORT}],
                "target": [{"name": "http", "listen": ANY_PORT}]},
               argv_prefix=private_hosts_prefix(hosts))
    try:
        vp, tp = d.port("edge"), d.port("http")
        resp, _ = vless_get(vp, UUID, tp, "/", dest="near.vlessbench.test")
        check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
        for name, refused in (("far.vlessbench.test", "192.0.2.1"), ("mixed.vlessbench.test", "192.0.2.9")):
            mark = d.mark()
            with DialWitness() as w:
                with TlsClient(vp) as c:
                    c.handshake()
                    c.send(vless_header(UUID, w.port, name) + GET)
                    drain(c.stream)
                e = d.wait_event("vless.reject", since=mark)
                check(e["reason"] == "dest_not_allowed" and e["dest"] == f"{name}:{w.port}", e)
                check(e["phase"] == "connect" and refused in e.get("detail", ""), e)
                # Refused before dialling any of its addresses: mixed's 127.0.0.1 would have
                # reached the witness (and far's TEST-NET address ended as connect_failed).
                check(w.dialled() == 0, f"{name}: an address was dialled before every one was checked")
        # The machine's own /etc/hosts is untouched (the bind mount lived in the daemon's namespace).
        check("far.vlessbench.test" not in open("/etc/hosts").read(), "the private hosts file leaked out")
    finally:
        d.stop()


@suite.test
def destination_policy_follows_reload():
    # 0.0.0.0 is not loopback by the policy's reading, but a connect to it stays on this machine
    # (Linux dials 127.0.0.1): a safe way to show a widened list taking effect.
    check(reject_for("0.0.0.0", TP)["reason"] == "dest_not_allowed")
    cfg = dict(D.cfg)
    cfg["destinations"] = {"allow": ["0.0.0.0/32"]}
    ev = D.reload(cfg)
    check(ev["ok"] is True, ev)
    resp, _ = vless_get(VP, UUID, TP, "/", dest="0.0.0.0")
    check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
    bad = dict(D.cfg)
    bad["destinations"] = {"allow": ["0.0.0.1/8"]}
    ev = D.reload(bad)
    check(ev["ok"] is False and "destinations.allow[0]" in ev["error"] and "host bits" in ev["error"], ev)
    resp, _ = vless_get(VP, UUID, TP, "/", dest="0.0.0.0")  # the old list still holds
    check(resp.status == 200, resp)
    cfg = dict(D.cfg)
    cfg.pop("destinations")
    check(D.reload(cfg)["ok"] is True)
    check(reject_for("0.0.0.0", TP)["reason"] == "dest_not_allowed")


@suite.test
def still_serving_at_end():
    check(D.running(), "daemon died")
    healthy()
    check(not D.unexpected_exceptions(), D.stderr())


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
