#!/usr/bin/env python3
"""sing-mux against clients that abuse its bookkeeping (issue 38 items 3-6), from a raw TLS client:

- a flood of smux SYNs past max_mux_subs on one connection: the refused streams are freed (RSS bounded),
  each counted in the session's `subs_refused`;
- one-byte smux PSH frames to a refused stream (smux version 1): no credit kept for bytes nobody reads;
- a yamux ping flood from a client with a 4 KiB receive buffer that never reads: the answers wait in a
  bounded queue (the client's bytes are no longer read meanwhile), and the session ends with
  `slow_transfer` (the minimum-rate rule) with the daemon's RSS bounded;
- a duplicate yamux SYN in the same write as a live stream's data, 40 sessions at once: every session
  ends at once with `mux_error` `duplicate_stream` and its vless.session line, also with the client
  holding its end open, and the daemon's SIGTERM finds none left.

RSS bounds hold for the uninstrumented build only (ASan keeps freed memory in its quarantine). FIGURE
lines carry the figures of docs/reliability.md."""
from __future__ import annotations

import socket
import ssl
import struct
import time

import harness as h
from harness import check

suite = h.Suite("test_sing_mux_hostile")
h.require_binary()
MAX_SUBS = 8
USER = "tester"
UUID = h.new_uuid()
WINDOW_MS = 2000
ECHO = h.EchoServer()


def daemon() -> h.Daemon:
    """A daemon of its own per test: an RSS figure is this test's alone (an earlier session's freed
    memory is not given back to the kernel at a predictable moment)."""
    return h.Daemon({
        "users": [{"name": USER, "uuid": UUID}],
        "vless": [{"name": "tls", "listen": h.ANY_PORT}],
    }, limits={"max_mux_subs": MAX_SUBS, "min_rate_window_ms": WINDOW_MS, "idle_timeout_ms": 60000})
REQUEST = struct.pack(">H", 0) + b"\x01" + socket.inet_aton("127.0.0.1")  # + port: a sing-mux stream request


def raw_session(D: h.Daemon, payload: bytes, rcvbuf: int | None = None) -> h.TlsClient:
    sock = None
    if rcvbuf is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(5)
        sock.connect((h.LOOPBACK, D.port("tls")))
    t = h.TlsClient(D.port("tls"), sock=sock).handshake()
    t.send(h.vless_header(UUID, 444, addr="sp.mux.sing-box.arpa") + payload)
    return t


def smux(ver: int, cmd: int, sid: int, data: bytes = b"") -> bytes:
    return struct.pack("<BBHI", ver, cmd, len(data), sid) + data


def yamux(typ: int, flags: int, sid: int, length: int, data: bytes = b"") -> bytes:
    return struct.pack(">BBHII", 0, typ, flags, sid, length) + data


def read_available(t: h.TlsClient) -> int:
    """Reads what the daemon sent so far without waiting; the plaintext's length (-1: the session ended)."""
    t.sock.setblocking(False)
    got = 0
    try:
        while True:
            try:
                data = t.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                return -1
            t.incoming.write(data)
            while True:
                try:
                    got += len(t.obj.read(1 << 20))
                except ssl.SSLWantReadError:
                    break
    finally:
        t.sock.settimeout(5)
    return got


def send_reading(t: h.TlsClient, chunks) -> None:
    """Sends each chunk (one TLS write), reading the daemon's answers in between: a client that reads."""
    for chunk in chunks:
        t.obj.write(chunk)
        data = t.outgoing.read()
        view = memoryview(data)
        t.sock.setblocking(False)
        try:
            while view:
                try:
                    view = view[t.sock.send(view):]
                except (BlockingIOError, InterruptedError):
                    t.sock.settimeout(5)
                    read_available(t)
                    t.sock.setblocking(False)
                    time.sleep(0.001)
        finally:
            t.sock.settimeout(5)
        check(read_available(t) >= 0, "the daemon closed a session it should serve")


def read_until_quiet(t: h.TlsClient, quiet: float = 1.0, limit: float = 60.0) -> int:
    """Reads the daemon's answers until none came for `quiet` seconds: it has read all we sent."""
    got = 0
    last = time.monotonic()
    end = last + limit
    while time.monotonic() < end and time.monotonic() - last < quiet:
        n = read_available(t)
        check(n >= 0, "the daemon closed a session it should serve")
        if n > 0:
            got += n
            last = time.monotonic()
        time.sleep(0.05)
    return got


def settle_rss(pid: int) -> int:
    """The daemon's RSS once it holds still (an earlier session's memory given back first)."""
    last = h.rss_kib(pid)
    for _ in range(12):
        time.sleep(0.5)
        now = h.rss_kib(pid)
        if abs(now - last) < 1024:
            return now
        last = now
    return last


@suite.test
def refused_streams_are_freed():
    """600,000 smux SYNs past max_mux_subs on one connection: each refused and forgotten."""
    with daemon() as D:
        n = 600_000
        pid = D.proc.pid
        rss0 = settle_rss(pid)
        mark = D.mark()
        t = raw_session(D, b"\x00\x00")  # version 0, smux
        # MAX_SUBS live streams (opened, no request yet), then the flood: every one past them refused.
        live = b"".join(smux(1, 0, sid) for sid in range(1, 2 * MAX_SUBS, 2))
        first = 2 * MAX_SUBS + 1
        sids = range(first, first + 2 * n, 2)
        per = 8000
        chunks = [live] + [b"".join(smux(1, 0, sid) for sid in sids[i:i + per]) for i in range(0, n, per)]
        send_reading(t, chunks)
        read_until_quiet(t)  # every SYN read and refused, the session still open
        grown = settle_rss(pid) - rss0
        t.sock.close()
        e = D.wait_event("vless.session", since=mark, timeout=20, sing_mux="smux")
        print(f"FIGURE sing_mux_refused_streams = {n}, RSS +{grown} KiB ({grown * 1024 / n:.1f} B each)", flush=True)
        check(e["subs_refused"] == n, e)
        check(h.SANITIZED or grown < 32 * 1024, f"RSS grew {grown} KiB for {n} refused streams")


@suite.test
def bytes_to_refused_streams_keep_no_credit():
    """smux version 1: 4,000,000 one-byte PSH frames (36 MB) to a stream refused past max_mux_subs."""
    with daemon() as D:
        n = 4_000_000
        pid = D.proc.pid
        rss0 = settle_rss(pid)
        mark = D.mark()
        t = raw_session(D, b"\x00\x00")
        refused = 2 * MAX_SUBS + 1
        opening = b"".join(smux(1, 0, sid) for sid in range(1, 2 * MAX_SUBS, 2)) + smux(1, 0, refused)
        per = 100_000
        one = smux(1, 2, refused, b"x")
        chunks = [opening] + [one * per for _ in range(n // per)]
        send_reading(t, chunks)
        # A stream request for a live stream, then its FIN: answered once the daemon has read all before it.
        t.send(smux(1, 2, 1, b"\x00\x00\x07"))  # flags 0, address type 7: refused at once
        read_until_quiet(t)
        grown = settle_rss(pid) - rss0
        t.sock.close()
        e = D.wait_event("vless.session", since=mark, timeout=20, sing_mux="smux")
        print(f"FIGURE sing_mux_psh_to_refused = {n} frames, RSS +{grown} KiB", flush=True)
        check(e["subs_refused"] == 2, e)
        check(h.SANITIZED or grown < 32 * 1024, f"RSS grew {grown} KiB for {n} frames to a refused stream")


@suite.test
def answers_to_a_client_that_does_not_read_are_bounded():
    """A yamux ping flood from a client with a 4 KiB receive buffer that never reads."""
    with daemon() as D:
        pid = D.proc.pid
        rss0 = settle_rss(pid)
        mark = D.mark()
        t = raw_session(D, b"\x00\x01", rcvbuf=4096)
        ping = yamux(2, 1, 0, 7)  # SYN: answered with an ACK
        block = ping * 8192  # 96 KiB
        t.sock.setblocking(False)
        sent = 0
        stalled_since = None
        deadline = time.monotonic() + 20
        pending = b""
        while time.monotonic() < deadline and sent < (400 << 20):
            if not pending:
                t.obj.write(block)
                pending = t.outgoing.read()
            try:
                k = t.sock.send(pending)
                pending = pending[k:]
                sent += k
                stalled_since = None
            except (BlockingIOError, InterruptedError):
                if stalled_since is None:
                    stalled_since = time.monotonic()
                elif time.monotonic() - stalled_since > 1.0:
                    break  # the daemon no longer reads us
                time.sleep(0.01)
        grown = settle_rss(pid) - rss0
        print(f"FIGURE sing_mux_unread_pongs = {sent >> 20} MiB of pings sent, RSS +{grown} KiB", flush=True)
        check(h.SANITIZED or grown < 32 * 1024, f"RSS grew {grown} KiB with {sent >> 20} MiB of pings unanswered")
        check(sent < (400 << 20), "the daemon read 400 MiB of pings from a client that reads nothing")
        # The minimum-rate rule ends it: the daemon's write has not moved within a window.
        e = D.wait_event("vless.session", since=mark, timeout=3 * WINDOW_MS / 1000 + 10, sing_mux="yamux")
        t.sock.close()
        check(e["close_reason"] == "slow_transfer", e)


@suite.test
def duplicate_syn_beside_live_data_ends_every_session():
    """40 sessions, each one write: a yamux stream's SYN, its request and data, and the same SYN again."""
    with daemon() as D:
        n = 40
        mark = D.mark()
        request = REQUEST + struct.pack(">H", ECHO.port)
        data = request + b"d" * 4000
        payload = b"\x00\x01" + yamux(1, 1, 1, 0) + yamux(0, 0, 1, len(data), data) + yamux(1, 1, 1, 0)
        clients = [raw_session(D, payload) for _ in range(n)]
        try:
            deadline = time.monotonic() + 10
            ended = []
            while time.monotonic() < deadline:
                ended = D.events("vless.session", since=mark, sing_mux="yamux")
                if len(ended) >= n:
                    break
                time.sleep(0.05)
            print(f"FIGURE sing_mux_duplicate_syn_sessions_ended = {len(ended)} of {n} within 10 s", flush=True)
            check(len(ended) == n, f"{len(ended)} of {n} sessions ended with the client's end open")
            bad = [e for e in ended if e["close_reason"] != "mux_error" or e.get("mux_error") != "duplicate_stream"]
            check(not bad, bad[:3])
        finally:
            for c in clients:
                c.sock.close()


@suite.test
def duplicate_syn_sessions_are_logged_at_sigterm():
    """The same sessions, the client reading nothing, and a SIGTERM at once: every line written."""
    n = 40
    d = h.Daemon({
        "users": [{"name": USER, "uuid": UUID}],
        "vless": [{"name": "tls", "listen": h.ANY_PORT}],
    }, limits={"max_mux_subs": MAX_SUBS})
    try:
        request = REQUEST + struct.pack(">H", ECHO.port)
        data = request + b"d" * 4000
        payload = b"\x00\x01" + yamux(1, 1, 1, 0) + yamux(0, 0, 1, len(data), data) + yamux(1, 1, 1, 0)
        clients = []
        for _ in range(n):
            t = h.TlsClient(d.port("tls")).handshake()
            t.send(h.vless_header(UUID, 444, addr="sp.mux.sing-box.arpa") + payload)
            clients.append(t)
        time.sleep(0.2)
        d.stop()
        ended = d.events("vless.session", sing_mux="yamux")
        check(len(ended) == n, f"{len(ended)} of {n} vless.session lines after SIGTERM")
        check(all(e["mux_error"] == "duplicate_stream" for e in ended), [e for e in ended][:3])
        for c in clients:
            c.sock.close()
    finally:
        d.stop()


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        ECHO.stop()
