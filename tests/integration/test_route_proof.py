#!/usr/bin/env python3
"""Route proof as a property (issue 16, docs/sessions.md "How a route is matched"; issue 27 item 4:
every transport).

Randomised VLESS sessions and direct clients, all at once against one daemon, with a config reload
every 250 ms, at threads = 1 and threads = N:
- carriers: raw TLS (two listeners, one on 0.0.0.0), WebSocket (with and without early data),
  HTTPUpgrade, gRPC over TLS and over h2c (several sessions on one HTTP/2 connection at a time);
- what a session carries: keep-alive HTTP requests (command 1; three users, IPv4 / IPv4-mapped IPv6
  destinations, two targets, one also on a non-loopback address), datagrams to the `[[udp_target]]`
  echo and queries to the `[[dns]]` responder (command 2), or Mux.Cool (command 3) with several
  sub-connections open at once, each HTTP, echo datagrams or DNS;
- direct clients: HTTP to both targets, datagrams to the echo and queries to the responder.

Every answer's route label (the route header, the echo's trailer, the DNS TXT record) must say
what the client really did: `direct` for a direct client; for a relayed one the session it
learned from its first answer (and no other client session may see that id), the sub-connection
by the order of its New frames, the user it chose and the carrier's transport. After the run the
daemon is stopped and its access log read whole: every session id a client saw has its
`vless.session` line with that client's listener, transport, user, command, client address,
destination and bytes; every `vless.sub` its parent and wire id; every `http.request`, `dns.query`
and `udp.packet` line names the session (and sub) the client's answer named, and the counts per
session (and sub) match what the client got. One disagreement is a mislabel; the run needs 0.

The run happens in a network namespace this test creates (unshare --net), for two reasons: the
non-loopback address (10.88.0.1 on the namespace's lo) is the daemon's own, as a VM's LAN address
is; and the namespace's ephemeral port range is cut to 48 ports, so that upstream connections and
direct clients share local ports all the time (Linux lets connect()-bound sockets share a local
port when their destinations differ), and VLESS UDP sessions' relay ports are taken over by
direct UDP clients within seconds — the collisions a busy machine produces now and then happen
here in every run. The test counts the shared ports and requires some. 48 ports are enough
because nothing here leaves a TIME_WAIT on an ephemeral port (the daemon closes first: the target
after `Connection: close`, the VLESS listener after the client's close_notify / close frame / END_STREAM),
gRPC sessions are streams of two long-lived HTTP/2 connections, and a mux session's sub-connections
share one client connection.

One deterministic check beside it: UDP sub-connections of one Mux.Cool session that get the same
relay port one after the other keep their own labels (the property run found them sharing one).

`VLESSBENCH_ROUTE_PROOF_SEED=N` repeats a run's choices (the seed is printed; the threads'
interleaving is the kernel's).
"""
from __future__ import annotations

import base64
import os
import queue
import random
import re
import signal
import socket
import ssl
import struct
import threading
import time
import traceback
from pathlib import Path

import harness as h
from grpc_wire import (DATA, GOAWAY, HEADERS, PING, PREFACE, RST_STREAM, SETTINGS, WINDOW_UPDATE, h2frame, hunk,
                       request_block, unhunk)

LAN = "10.88.0.1"  # the namespace's own non-loopback address
PORT_RANGE = (40000, 40047)
VLESS_PORTS = (18443, 18444)
WS_PORT, UP_PORT, GRPC_PORT, H2C_PORT = 18445, 18446, 18447, 18448
TARGET_A = 18080  # 127.0.0.1 only
TARGET_B = 18081  # 0.0.0.0: loopback and the LAN address
UDP_ECHO = 18083  # 0.0.0.0
DNS_PORT = 18053  # 0.0.0.0, UDP (and TCP)
SEED_ENV = "VLESSBENCH_ROUTE_PROOF_SEED"

suite = h.Suite("test_route_proof")
USERS = [("alice", h.new_uuid()), ("bob", h.new_uuid()), ("carol", h.new_uuid())]
# How long each run generates load, and how many clients do what.
SECONDS = 3.0 if h.SANITIZED else 6.0
SESSION_WORKERS = 14
DIRECT_WORKERS = 6
DIRECT_UDP_WORKERS = 2

# carrier -> (listener, port, transport as the route header and vless.session name it; "" = raw TLS)
CARRIERS = {
    "tls1": ("v1", VLESS_PORTS[0], ""),
    "tls2": ("v2", VLESS_PORTS[1], ""),
    "ws": ("ws", WS_PORT, "ws"),
    "httpupgrade": ("up", UP_PORT, "httpupgrade"),
    "grpc": ("grpc", GRPC_PORT, "grpc"),
    "h2c": ("h2c", H2C_PORT, "grpc"),
}
CARRIER_WEIGHTS = {"tls1": 3, "tls2": 3, "ws": 2, "httpupgrade": 2, "grpc": 2, "h2c": 1}
KIND_WEIGHTS = {"http": 6, "udp": 2, "dns": 2, "mux": 2}


def make_config(threads: int, quickack: str) -> dict:
    pol = h.policy(True, quickack)
    both = {"tcp": pol, "upstream_tcp": pol}
    return {
        "users": [{"name": n, "uuid": u} for n, u in USERS],
        "vless": [
            {"name": "v1", "listen": f"0.0.0.0:{VLESS_PORTS[0]}", **both},
            {"name": "v2", "listen": f"127.0.0.1:{VLESS_PORTS[1]}", **both},
            {"name": "ws", "listen": f"127.0.0.1:{WS_PORT}", "transport": "ws", "path": "/ws",
             "max_early_data": 2048, **both},
            {"name": "up", "listen": f"127.0.0.1:{UP_PORT}", "transport": "httpupgrade", "path": "/up", **both},
            {"name": "grpc", "listen": f"127.0.0.1:{GRPC_PORT}", "transport": "grpc", **both},
            {"name": "h2c", "listen": f"127.0.0.1:{H2C_PORT}", "transport": "grpc", "tls": False, **both},
        ],
        "target": [
            {"name": "a", "listen": f"127.0.0.1:{TARGET_A}"},
            {"name": "b", "listen": f"0.0.0.0:{TARGET_B}"},
        ],
        "udp_target": [{"name": "udp", "listen": f"0.0.0.0:{UDP_ECHO}"}],
        "dns": [{"name": "dns", "listen": f"0.0.0.0:{DNS_PORT}"}],
        "limits": {"threads": threads, "max_sessions": 1000, **h.ONE_ADDRESS_LOAD},
        # Every line is counted below: none may be dropped by the rate bound.
        "log": {"max_lines_per_second": 0, "max_session_lines_per_second": 0},
    }


# (VLESS header address, port) a session may ask for: IPv4 and IPv4-mapped IPv6 forms of the same
# targets, and target b on the namespace's LAN address.
DESTINATIONS = [
    ("127.0.0.1", TARGET_A), ("::ffff:127.0.0.1", TARGET_A),
    ("127.0.0.1", TARGET_B), ("::ffff:127.0.0.1", TARGET_B), (LAN, TARGET_B), (f"::ffff:{LAN}", TARGET_B),
]
DIRECT = [("127.0.0.1", TARGET_A), ("127.0.0.1", TARGET_B), (LAN, TARGET_B)]
UDP_ADDRS = ["127.0.0.1", LAN]  # the echo and the responder listen on 0.0.0.0


def seed_base() -> int:
    text = os.environ.get(SEED_ENV)
    return int(text) if text else random.SystemRandom().randrange(1 << 31)


# --------------------------------------------------------------------------------------------
# What the clients saw: the truth the access log is checked against

class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.violations: dict[str, int] = {}  # kind -> count
        self.sessions: dict[int, dict] = {}  # session id -> the client's record of it
        self.answers: dict[str, int] = {}  # "carrier/kind" -> answers with a checked label
        self.direct = {"http": 0, "udp": 0, "dns": 0}
        self.expected_http: dict[str, tuple] = {}  # seq -> (route, session, sub, user, listener)
        self.expected_dns: dict[str, tuple] = {}  # query name -> (route, session, sub, user)
        self.io_failures = 0
        self.io_examples: list[str] = []

    def error(self, msg: str, kind: str) -> None:
        with self.lock:
            self.violations[kind] = self.violations.get(kind, 0) + 1
            if len(self.errors) < 30:
                self.errors.append(msg)

    def answered(self, key: str) -> None:
        with self.lock:
            self.answers[key] = self.answers.get(key, 0) + 1

    @property
    def mislabels(self) -> int:
        return sum(self.violations.values())


def io_failure(tally: Tally, what: str, e: BaseException) -> None:
    with tally.lock:
        tally.io_failures += 1
        n = tally.io_failures
        if len(tally.io_examples) < 5:
            tally.io_examples.append(f"{what}: {e!r}")
    if n > 20:
        tally.error(f"{what}: {e!r} (I/O failure {n})", "io")
    time.sleep(0.01)


def last_request(i: int, n: int) -> dict:
    """The target closes first after the last request, so TIME_WAIT lands on its side and the 48
    ephemeral ports stay free for new connections."""
    return {"Connection": "close"} if i == n - 1 else {}


ROUTE_RE = re.compile(r"vless session=(\d+)(?: sub=(\d+))? user=(\S+)(?: transport=(\S+))?")


def parse_route(route: str) -> tuple[int, int | None, str, str] | None:
    """(session, sub, user, transport or "") of a relayed route label; None if it is not one."""
    m = ROUTE_RE.fullmatch(route)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)) if m.group(2) else None, m.group(3), m.group(4) or ""


UDP_MARKER = b"\nVLESSBENCH-UDP "


def echo_trailer(sent: bytes, echo: bytes) -> tuple[str, str] | None:
    """(listener, route) of an echo of sent, or None if the echo is not one: the part before the
    last marker must be a prefix of what was sent (the echo may shorten the payload so that the
    trailer fits in the request's size, or carry all of it)."""
    at = echo.rfind(UDP_MARKER)
    if at < 16 or not sent.startswith(echo[:at]):
        return None
    listener, _, route = echo[at + len(UDP_MARKER):].decode("latin-1").partition(" ")
    return listener, route


def padded(tag: str, size: int = 256) -> bytes:
    """A datagram that starts with its tag and is long enough for any echo format's trailer."""
    raw = tag.encode() + b":"
    return raw + b"." * (size - len(raw))


def dns_route(answer: bytes, qid: int) -> str | None:
    """The route of a [[dns]] answer to query qid (its TXT record `VLESSBENCH-DNS dns ROUTE`)."""
    if len(answer) < 12 or struct.unpack(">H", answer[:2])[0] != qid or answer[3] & 0xF:
        return None
    at = answer.rfind(b"VLESSBENCH-DNS ")
    if at < 1 or answer[at - 1] != len(answer) - at:  # the character-string's length byte
        return None
    listener, _, route = answer[at + 15:].decode("latin-1").partition(" ")
    return route if listener == "dns" else None


# --------------------------------------------------------------------------------------------
# Carriers: one VLESS stream over raw TLS, WebSocket, HTTPUpgrade or a gRPC stream

def ws_mask(data: bytes) -> bytes:
    key = os.urandom(4)
    n = len(data)
    k = (key * (n // 4 + 1))[:n]
    return key + (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def ws_frame(op: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | op, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | op, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | op, 0x80 | 127]) + struct.pack(">Q", n)
    return head + ws_mask(payload)


class Carrier:
    """A VLESS stream: .stream (h.Stream), opened with its first bytes (VLESS header and all)."""

    def __init__(self, name: str, first: bytes, rng: random.Random, pool: "GrpcPool"):
        self.name = name
        self.listener, port, self.transport = CARRIERS[name]
        self.grpc = None
        self.tls = None
        if self.transport == "grpc":
            self.grpc = pool.open_stream(name, first)
            self.stream = self.grpc.stream
            self.client = self.grpc.conn.client
            return
        host = rng.choice(["127.0.0.1", LAN]) if self.listener == "v1" else "127.0.0.1"
        self.tls = h.TlsClient(port, host, timeout=10)
        self.client = "%s:%d" % self.tls.sock.getsockname()[:2]
        try:
            self._open(first, rng)
        except BaseException:
            self.tls.close()
            raise

    def _open(self, first: bytes, rng: random.Random) -> None:
        self.tls.handshake()
        if self.transport == "":
            self.tls.send(first)
            self.stream = self.tls.stream
        elif self.transport == "httpupgrade":
            self.tls.send(b"GET /up HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                          + first)
            resp = self.tls.stream.read_response(head_only=True)
            if resp.status != 101:
                raise ConnectionError(f"httpupgrade: {resp}")
            self.stream = self.tls.stream
        else:  # ws, with early data in Sec-WebSocket-Protocol or the first bytes in a frame
            early = rng.random() < 0.5
            key = base64.b64encode(os.urandom(16)).decode()
            head = (f"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n")
            if early:
                head += f"Sec-WebSocket-Protocol: {base64.urlsafe_b64encode(first).rstrip(b'=').decode()}\r\n"
            self.tls.send(head.encode() + b"\r\n" + (b"" if early else ws_frame(0x2, first)))
            resp = self.tls.stream.read_response(head_only=True)
            if resp.status != 101:
                raise ConnectionError(f"ws: {resp}")
            self.ws_closed = False
            self.stream = h.Stream(self._ws_recv, lambda d: self.tls.send(ws_frame(0x2, d)))

    def _ws_recv(self, _n: int) -> bytes:
        under = self.tls.stream
        while not self.ws_closed:
            b0, b1 = under.read_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", under.read_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", under.read_exact(8))[0]
            op, data = b0 & 0x0F, under.read_exact(n)
            if op in (0x0, 0x2) and data:
                return data
            if op == 0x9:
                self.tls.send(ws_frame(0xA, data))
            elif op == 0x8:
                self.ws_closed = True
                self.tls.send(ws_frame(0x8, data[:2]))
        return b""

    def end(self) -> None:
        """Ends the session from the client's side (if the server has not) and waits for the
        daemon to close first, so that no TIME_WAIT stays on an ephemeral port."""
        if self.grpc is not None:
            self.grpc.end()
            return
        try:
            if self.transport == "ws" and not self.ws_closed:
                self.tls.send(ws_frame(0x8, struct.pack(">H", 1000)))
            self.tls.close_notify()
            self.tls.sock.settimeout(10)
            while self.tls.sock.recv(4096):
                pass
        except OSError:
            pass
        finally:
            self.tls.close()

    def abort(self) -> None:
        if self.grpc is not None:
            self.grpc.reset()
        elif self.tls is not None:
            self.tls.close()


class GrpcStream:
    def __init__(self, conn: "GrpcConn", sid: int):
        self.conn = conn
        self.sid = sid
        self.raw = b""  # gRPC messages not yet complete
        self.chunks: queue.Queue = queue.Queue()  # Hunk data, b"" at the end of the stream
        self.ended = False
        self.sent_end = False
        self.stream = h.Stream(self._recv, self._send)

    def _recv(self, _n: int) -> bytes:
        if self.ended:
            return b""
        try:
            data = self.chunks.get(timeout=10)
        except queue.Empty:
            raise TimeoutError(f"grpc stream {self.sid}: nothing for 10 s") from None
        if not data:
            self.ended = True
        return data

    def _send(self, data: bytes) -> None:
        self.conn.send(h2frame(DATA, 0, self.sid, hunk(data)))

    def end(self) -> None:
        if not self.sent_end:
            self.sent_end = True
            self.conn.send(h2frame(DATA, 0x1, self.sid))
        while self._recv(0):
            pass

    def reset(self) -> None:
        try:
            self.conn.send(h2frame(RST_STREAM, 0, self.sid, struct.pack(">I", 8)))
        except OSError:
            pass


class GrpcConn:
    """One HTTP/2 connection to a grpc listener (TLS with ALPN h2, or h2c), shared by the worker
    threads: each session is a stream; a reader thread hands each stream its Hunk data. TLS goes
    through memory BIOs under one lock, so reads and writes of several threads never meet in the
    TLS object at once."""

    def __init__(self, carrier: str):
        listener, port, _ = CARRIERS[carrier]
        self.sock = h.tcp_connect(port, timeout=10)
        self.client = "%s:%d" % self.sock.getsockname()[:2]
        self.lock = threading.Lock()
        self.tls = None
        if listener == "grpc":
            ctx = h.client_tls_context()
            ctx.set_alpn_protocols(["h2"])
            self.tls = h.TlsClient(0, sock=self.sock, context=ctx, timeout=10).handshake()
        self.sock.settimeout(30)  # the reader's bound; a run is seconds long
        self.streams: dict[int, GrpcStream] = {}
        self.next_sid = 1
        self.dead = False
        # Streams may receive as much as they like; the connection's window is reopened per DATA.
        self._write(PREFACE + h2frame(SETTINGS, 0, 0, struct.pack(">HI", 4, (1 << 31) - 1))
                    + h2frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    def _write(self, data: bytes) -> None:
        with self.lock:
            self._write_locked(data)

    def _write_locked(self, data: bytes) -> None:
        if self.tls is None:
            self.sock.sendall(data)
        else:
            self.tls.obj.write(data)
            self.tls._flush()

    def send(self, data: bytes) -> None:
        if self.dead:
            raise ConnectionError("grpc connection gone")
        self._write(data)

    def open_stream(self, first: bytes) -> GrpcStream:
        if self.dead:
            raise ConnectionError("grpc connection gone")
        # One lock for the id and the HEADERS that opens it: ids must reach the server in order.
        with self.lock:
            sid = self.next_sid
            self.next_sid += 2
            st = self.streams[sid] = GrpcStream(self, sid)
            self._write_locked(h2frame(HEADERS, 0x4, sid, request_block()) + h2frame(DATA, 0, sid, hunk(first)))
        return st

    def _plain(self) -> bytes:
        """The next bytes of the HTTP/2 connection (b"" at its end)."""
        while True:
            data = self.sock.recv(65536)
            if not data or self.tls is None:
                return data
            out = b""
            with self.lock:
                self.tls.incoming.write(data)
                while True:
                    try:
                        chunk = self.tls.obj.read(65536)
                    except ssl.SSLWantReadError:
                        break
                    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                        return out
                    if not chunk:
                        break
                    out += chunk
            if out:
                return out

    def _read_loop(self) -> None:
        buf = b""
        try:
            while True:
                data = self._plain()
                if not data:
                    break
                buf += data
                while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                    n = int.from_bytes(buf[:3], "big")
                    kind, flags, payload = buf[3], buf[4], buf[9:9 + n]
                    sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    buf = buf[9 + n:]
                    self._frame(kind, flags, sid, payload)
        except OSError:
            pass
        finally:
            self.dead = True
            for st in list(self.streams.values()):
                st.chunks.put(b"")

    def _frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == SETTINGS and not flags & 0x1:
            self._write(h2frame(SETTINGS, 0x1, 0))
        elif kind == PING and not flags & 0x1:
            self._write(h2frame(PING, 0x1, 0, payload))
        elif kind == GOAWAY:
            self.dead = True
        elif kind in (DATA, HEADERS, RST_STREAM) and sid in self.streams:
            st = self.streams[sid]
            if kind == DATA and payload:
                self._write(h2frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(payload))))
                if flags & 0x8:  # padded
                    payload = payload[1:len(payload) - payload[0]]
                st.raw += payload
                while len(st.raw) >= 5 and len(st.raw) >= 5 + struct.unpack(">I", st.raw[1:5])[0]:
                    m = 5 + struct.unpack(">I", st.raw[1:5])[0]
                    msg, st.raw = st.raw[:m], st.raw[m:]
                    data = unhunk(msg)
                    if data:
                        st.chunks.put(data)
            if kind == RST_STREAM or flags & 0x1:
                st.chunks.put(b"")
                with self.lock:
                    self.streams.pop(sid, None)

    def close(self) -> None:
        try:
            if self.tls is not None:
                with self.lock:
                    self.tls.close_notify()
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.reader.join(timeout=10)
        self.sock.close()


class GrpcPool:
    """One shared HTTP/2 connection per grpc listener, made again if the daemon ends one."""

    def __init__(self):
        self.lock = threading.Lock()
        self.conns: dict[str, GrpcConn] = {}
        self.made = 0

    def open_stream(self, carrier: str, first: bytes) -> GrpcStream:
        with self.lock:
            conn = self.conns.get(carrier)
            if conn is None or conn.dead:
                conn = self.conns[carrier] = GrpcConn(carrier)
                self.made += 1
        return conn.open_stream(first)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


# --------------------------------------------------------------------------------------------
# What a session carries

class Expect:
    """The label a relayed answer must carry: learned session id, fixed user and transport."""

    def __init__(self, tally: Tally, record: dict, what: str):
        self.tally = tally
        self.record = record
        self.what = what

    def check(self, route: str, sub: int | None, detail: str) -> bool:
        """True if route names this session (its id as learned, or learns it), sub, user, transport."""
        rec, tally = self.record, self.tally
        got = parse_route(route)
        if got is None:
            tally.error(f"{self.what} {detail}: route {route!r}",
                        "relayed answer labelled direct" if route == "direct" else "relayed answer unparsable")
            return False
        sid, gsub, user, transport = got
        if user != rec["user"]:
            tally.error(f"{self.what} {detail}: {route!r}, sent as {rec['user']}", "relayed answer labelled as another user's")
            return False
        if transport != rec["transport"]:
            tally.error(f"{self.what} {detail}: {route!r}, carried over {rec['carrier']}", "wrong transport")
            return False
        if gsub != sub:
            tally.error(f"{self.what} {detail}: {route!r}, want sub {sub}", "wrong sub")
            return False
        if rec["id"] is None:
            with tally.lock:
                other = tally.sessions.get(sid)
                if other is None:
                    tally.sessions[sid] = rec
            if other is not None:
                tally.error(f"{self.what} {detail}: session {sid} already seen by {other['what']}",
                            "one session id, two client sessions")
                return False
            rec["id"] = sid
        elif sid != rec["id"]:
            tally.error(f"{self.what} {detail}: session {sid}, earlier answers said {rec['id']}",
                        "relayed answer labelled as another session's")
            return False
        return True


def read_http_answer(stream: h.Stream, seq: str, expect: Expect, sub: int | None, counts: dict, key: str,
                     tally: Tally, listener: str) -> None:
    resp = stream.read_response()
    route = resp.headers.get("x-vlessbench-route", "")
    if expect.check(route, sub, f"request {seq}"):
        rec = expect.record
        with tally.lock:
            tally.expected_http[seq] = ("vless", rec["id"], sub, rec["user"], listener)
        counts["http"] = counts.get("http", 0) + 1
        tally.answered(key)


def session_once(run: str, wid: int, n: int, tally: Tally, rng: random.Random, pool: GrpcPool) -> None:
    carrier = rng.choices(list(CARRIER_WEIGHTS), weights=list(CARRIER_WEIGHTS.values()))[0]
    kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
    name, uuid = rng.choice(USERS)
    listener, _, transport = CARRIERS[carrier]
    what = f"{carrier}/{kind} session s{wid}.{n}"
    rec = {"id": None, "what": what, "carrier": carrier, "listener": listener, "transport": transport,
           "user": name, "kind": kind, "complete": False, "http": 0, "bytes_up": 0, "udp": 0, "dns": 0, "subs": {}}
    expect = Expect(tally, rec, what)
    key = f"{carrier}/{kind}"
    c = None
    try:
        if kind == "http":
            addr, port = rng.choice(DESTINATIONS)
            rec["dest_port"] = port
            requests = rng.randint(1, 4)
            header = h.vless_header(uuid, port, addr)
            for i in range(requests):
                seq = f"{run}.s{wid}.{n}.{i}"
                req = h.http_request("GET", "/generate_204", headers={
                    "X-Vlessbench-Run": run, "X-Vlessbench-Seq": seq, "X-Vlessbench-Path": f"vless-{name}",
                    **last_request(i, requests)})
                if i == 0:
                    c = Carrier(carrier, header + req, rng, pool)
                    rec["client"] = c.client
                    h.read_vless_response_header(c.stream)
                else:
                    c.stream.send(req)
                rec["bytes_up"] += len(req)
                read_http_answer(c.stream, seq, expect, None, rec, key, tally, listener)
            c.stream.at_eof()  # the target closed first, then the daemon
        elif kind in ("udp", "dns"):
            addr = rng.choice(UDP_ADDRS)
            port = UDP_ECHO if kind == "udp" else DNS_PORT
            rec["dest_port"] = port
            count = rng.randint(1, 5)
            header = h.vless_header(uuid, port, addr, cmd=2)
            for i in range(count):
                tag = f"{run}.s{wid}.{n}.{i}"
                if kind == "udp":
                    data = padded(tag)
                else:
                    qid = rng.randrange(1 << 16)
                    qname = f"q{tag.replace('.', '-')}.vlessbench.test"
                    data = h.dns_query(qid, qname)
                if i == 0:
                    c = Carrier(carrier, header + h.udp_frame(data), rng, pool)
                    rec["client"] = c.client
                    h.read_vless_response_header(c.stream)
                else:
                    c.stream.send(h.udp_frame(data))
                answer = h.read_udp_frame(c.stream)
                if kind == "udp":
                    got = echo_trailer(data, answer)
                    if got is None or got[0] != "udp":
                        tally.error(f"{what} datagram {tag}: echo {answer[-80:]!r}", "echo without a trailer")
                        continue
                    if expect.check(got[1], None, f"datagram {tag}"):
                        rec["udp"] += 1
                        tally.answered(key)
                else:
                    route = dns_route(answer, qid)
                    if route is None:
                        tally.error(f"{what} query {qname}: answer {answer[-80:]!r}", "DNS answer without a route")
                        continue
                    if expect.check(route, None, f"query {qname}"):
                        rec["dns"] += 1
                        with tally.lock:
                            tally.expected_dns[qname] = ("vless", rec["id"], None, name)
                        tally.answered(key)
        else:
            mux_session(run, wid, n, uuid, carrier, rec, expect, tally, rng, pool, key)
            c = rec.pop("carrier_obj")
        c.end()
        c = None
        rec["complete"] = True
    except (OSError, EOFError, ValueError) as e:
        io_failure(tally, what, e)
        c = c or rec.pop("carrier_obj", None)
        if c is not None:
            c.abort()


NEW, KEEP, END, KEEPALIVE = 1, 2, 3, 4


def mux_target(port: int, addr: str, net: int) -> bytes:
    if ":" in addr:
        return bytes([net]) + struct.pack(">H", port) + b"\x03" + socket.inet_pton(socket.AF_INET6, addr)
    return bytes([net]) + struct.pack(">H", port) + b"\x01" + socket.inet_aton(addr)


def mux_frame(mid: int, st: int, data: bytes | None = None, dest: bytes = b"") -> bytes:
    meta = struct.pack(">HBB", mid, st, 1 if data is not None else 0) + dest
    out = struct.pack(">H", len(meta)) + meta
    if data is not None:
        out += struct.pack(">H", len(data)) + data
    return out


class MuxDemux:
    """The daemon's Mux.Cool frames, by wire id: per-id Streams for the sub-connections."""

    def __init__(self, carrier: Carrier):
        self.carrier = carrier
        self.buffers: dict[int, list] = {}
        self.ended: set[int] = set()

    def pull(self, mid: int) -> bytes:
        while True:
            if self.buffers.get(mid):
                return self.buffers[mid].pop(0)
            if mid in self.ended:
                return b""
            fid, st, _opt, _meta, data = h.read_mux_frame(self.carrier.stream)
            if data:
                self.buffers.setdefault(fid, []).append(data)
            if st == END:
                self.ended.add(fid)

    def stream(self, mid: int) -> h.Stream:
        return h.Stream(lambda _n: self.pull(mid), lambda d: self.carrier.stream.send(mux_frame(mid, KEEP, d)))


def mux_session(run: str, wid: int, n: int, uuid: str, carrier: str, rec: dict, expect: Expect, tally: Tally,
                rng: random.Random, pool: GrpcPool, key: str) -> None:
    """A Mux.Cool session with 2-5 sub-connections open at once, their steps interleaved at random:
    HTTP (1-3 keep-alive requests), echo datagrams or DNS queries (1-3)."""
    rec["dest_port"] = None
    plans = []
    for k in range(rng.randint(2, 5)):
        sub_kind = rng.choices(["http", "udp", "dns"], weights=[3, 1, 1])[0]
        if sub_kind == "http":
            addr, port = rng.choice(DESTINATIONS)
        else:
            addr, port = rng.choice(UDP_ADDRS), UDP_ECHO if sub_kind == "udp" else DNS_PORT
        plans.append({"kind": sub_kind, "mid": 10 + k, "addr": addr, "port": port, "steps": rng.randint(1, 3),
                      "done": 0, "sub": None, "stream": None})
    c = None
    demux = None
    opened = 0
    while any(p["done"] < p["steps"] for p in plans):
        p = rng.choice([p for p in plans if p["done"] < p["steps"]])
        i = p["done"]
        tag = f"{run}.s{wid}.{n}.m{p['mid']}.{i}"
        if p["kind"] == "http":
            payload = h.http_request("GET", "/generate_204", headers={
                "X-Vlessbench-Run": run, "X-Vlessbench-Seq": tag, "X-Vlessbench-Path": f"vless-{rec['user']}",
                **last_request(i, p["steps"])})
        elif p["kind"] == "udp":
            payload = padded(tag)
        else:
            qid = rng.randrange(1 << 16)
            qname = f"q{tag.replace('.', '-')}.vlessbench.test"
            payload = h.dns_query(qid, qname)
        if i == 0:
            opened += 1
            p["sub"] = opened  # subs are numbered 1, 2, ... in the order of their New frames
            frame = mux_frame(p["mid"], NEW, payload, mux_target(p["port"], p["addr"], 1 if p["kind"] == "http" else 2))
            rec["subs"][p["sub"]] = {"mid": p["mid"], "net": "tcp" if p["kind"] == "http" else "udp",
                                     "port": p["port"], "http": 0, "udp": 0, "dns": 0, "bytes_up": 0}
            if c is None:
                c = Carrier(carrier, h.vless_header(uuid, 0, cmd=3) + frame, rng, pool)
                rec["client"] = c.client
                rec["carrier_obj"] = c
                h.read_vless_response_header(c.stream)
                demux = MuxDemux(c)
            else:
                c.stream.send(frame)
            p["stream"] = demux.stream(p["mid"])
        else:
            p["stream"].send(payload)
        srec = rec["subs"][p["sub"]]
        srec["bytes_up"] += len(payload)
        skey = f"{key}-{p['kind']}"
        if p["kind"] == "http":
            read_http_answer(p["stream"], tag, expect, p["sub"], srec, skey, tally, rec["listener"])
            if i == p["steps"] - 1:
                p["stream"].at_eof()  # the target closed: the daemon's End
        else:
            answer = demux.pull(p["mid"])
            if p["kind"] == "udp":
                got = echo_trailer(payload, answer)
                if got is None or got[0] != "udp":
                    tally.error(f"{rec['what']} datagram {tag}: echo {answer[-80:]!r}", "echo without a trailer")
                elif expect.check(got[1], p["sub"], f"datagram {tag}"):
                    srec["udp"] += 1
                    tally.answered(skey)
            else:
                route = dns_route(answer, qid)
                if route is None:
                    tally.error(f"{rec['what']} query {qname}: answer {answer[-80:]!r}", "DNS answer without a route")
                elif expect.check(route, p["sub"], f"query {qname}"):
                    srec["dns"] += 1
                    with tally.lock:
                        tally.expected_dns[qname] = ("vless", rec["id"], p["sub"], rec["user"])
                    tally.answered(skey)
            if i == p["steps"] - 1:
                c.stream.send(mux_frame(p["mid"], END))
        p["done"] += 1


def guarded(tally: Tally, fn, *args) -> None:
    """A worker thread's body: anything it did not expect fails the run (a thread's exception
    would otherwise end only that thread)."""
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - reported, not swallowed
        tally.error(f"{fn.__name__}: {traceback.format_exc()}", f"worker crashed: {type(e).__name__}")


def session_worker(run: str, wid: int, deadline: float, tally: Tally, rng: random.Random, pool: GrpcPool) -> None:
    n = 0
    while time.monotonic() < deadline:
        n += 1
        session_once(run, wid, n, tally, rng, pool)
        if rng.random() < 0.3:  # some sessions linger, so that many upstreams are open at once
            time.sleep(rng.uniform(0.0, 0.2))


def direct_worker(run: str, wid: int, deadline: float, tally: Tally, rng: random.Random) -> None:
    n = 0
    while time.monotonic() < deadline:
        n += 1
        addr, port = rng.choice(DIRECT)
        requests = rng.randint(1, 3)
        try:
            with h.tcp_connect(port, addr, timeout=10) as s:
                st = h.plain_stream(s)
                for i in range(requests):
                    seq = f"{run}.d{wid}.{n}.{i}"
                    st.send(h.http_request("GET", "/generate_204", headers={
                        "X-Vlessbench-Run": run, "X-Vlessbench-Seq": seq, "X-Vlessbench-Path": "direct",
                        **last_request(i, requests)}))
                    route = st.read_response().headers.get("x-vlessbench-route", "")
                    if route != "direct":
                        tally.error(f"direct request {seq} to {addr}:{port} from port "
                                    f"{s.getsockname()[1]}: route {route!r}", "direct answer labelled vless")
                    with tally.lock:
                        tally.direct["http"] += 1
                        tally.expected_http[seq] = ("direct", None, None, None, None)
                st.at_eof()  # the target closes first
            time.sleep(0.002)  # thousands of direct requests are plenty; keep the log small
        except (OSError, EOFError, ValueError) as e:
            io_failure(tally, f"direct worker {wid}", e)


def direct_udp_worker(run: str, wid: int, deadline: float, tally: Tally, rng: random.Random) -> None:
    """Datagrams to the echo and queries to the responder from fresh sockets, so that their
    source ports are the ones VLESS UDP sessions' relays had a moment ago."""
    n = 0
    while time.monotonic() < deadline:
        n += 1
        addr = rng.choice(UDP_ADDRS)
        tag = f"{run}.u{wid}.{n}"
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.settimeout(5)
                if rng.random() < 0.5:
                    data = padded(tag)
                    u.connect((addr, UDP_ECHO))
                    u.send(data)
                    got = echo_trailer(data, u.recv(65535))
                    if got != ("udp", "direct"):
                        tally.error(f"direct datagram {tag} from port {u.getsockname()[1]}: {got}",
                                    "direct answer labelled vless")
                    with tally.lock:
                        tally.direct["udp"] += 1
                else:
                    qid = rng.randrange(1 << 16)
                    qname = f"q{tag.replace('.', '-')}.vlessbench.test"
                    u.connect((addr, DNS_PORT))
                    u.send(h.dns_query(qid, qname))
                    route = dns_route(u.recv(65535), qid)
                    if route != "direct":
                        tally.error(f"direct query {qname} from port {u.getsockname()[1]}: {route!r}",
                                    "direct answer labelled vless")
                    with tally.lock:
                        tally.direct["dns"] += 1
                        tally.expected_dns[qname] = ("direct", None, None, None)
            time.sleep(0.005)
        except OSError as e:
            io_failure(tally, f"direct udp worker {wid}", e)


# --------------------------------------------------------------------------------------------
# The access log's view

def check_log(events: list[dict], run: str, tally: Tally) -> tuple[list[str], dict]:
    """Disagreements between the log and what the clients saw (each one a mislabel), and figures."""
    bad: list[str] = []
    sessions = {e["session"]: e for e in events if e.get("event") == "vless.session"}
    subs = {(e["session"], e["sub"]): e for e in events if e.get("event") == "vless.sub" and e.get("sub")}
    http_by_session: dict = {}
    for e in events:
        if e.get("event") != "http.request" or e.get("run") != run:
            continue
        seq = e.get("seq")
        want = tally.expected_http.get(seq)
        if want is None:
            continue  # a request whose answer the client did not get (an I/O failure)
        got = (e.get("route"), e.get("vless_session"), e.get("vless_sub"), e.get("vless_user"), e.get("vless_listener"))
        if got != want:
            bad.append(f"http.request {seq}: {got}, the client's answer said {want}")
        if e.get("route") == "vless":
            k = (e.get("vless_session"), e.get("vless_sub"))
            http_by_session[k] = http_by_session.get(k, 0) + 1
    logged_http = sum(1 for e in events if e.get("event") == "http.request" and e.get("run") == run)
    logged_seqs = {e.get("seq") for e in events if e.get("event") == "http.request" and e.get("run") == run}
    missing = [s for s in tally.expected_http if s not in logged_seqs]
    if missing:
        bad.append(f"{len(missing)} answered requests have no http.request line, e.g. {missing[:3]}")
    dns_by_session: dict = {}
    seen_dns = set()
    for e in events:
        if e.get("event") != "dns.query":
            continue
        want = tally.expected_dns.get(e.get("name"))
        if want is None:
            continue
        seen_dns.add(e["name"])
        got = (e.get("route"), e.get("vless_session"), e.get("vless_sub"), e.get("vless_user"))
        if got != want:
            bad.append(f"dns.query {e['name']}: {got}, the client's answer said {want}")
        if e.get("route") == "vless":
            k = (e.get("vless_session"), e.get("vless_sub"))
            dns_by_session[k] = dns_by_session.get(k, 0) + 1
    if len(seen_dns) != len(tally.expected_dns):
        bad.append(f"{len(tally.expected_dns) - len(seen_dns)} answered queries have no dns.query line")
    udp_by_session: dict = {}
    udp_direct_in = 0
    udp_peers: dict = {"direct": set(), "vless": set()}
    for e in events:
        if e.get("event") != "udp.packet":
            continue
        udp_peers.setdefault(e.get("route"), set()).add(e["peer"].rsplit(":", 1)[1])
        if e.get("route") == "vless":
            k = (e.get("vless_session"), e.get("vless_sub"))
            udp_by_session[k] = udp_by_session.get(k, 0) + e.get("packets_in", 0)
        else:
            udp_direct_in += e.get("packets_in", 0)
    if udp_direct_in < tally.direct["udp"]:
        bad.append(f"udp.packet lines count {udp_direct_in} direct datagrams, clients got {tally.direct['udp']} answers")

    checked = 0
    for sid, rec in tally.sessions.items():
        s = sessions.get(sid)
        if s is None:
            bad.append(f"{rec['what']}: session {sid} has no vless.session line")
            continue
        checked += 1
        want_cmd = {"http": "tcp", "udp": "udp", "dns": "udp", "mux": "mux"}[rec["kind"]]
        got = (s.get("listener"), s.get("transport", ""), s.get("user"), s.get("cmd"), s.get("client"))
        want = (rec["listener"], rec["transport"], rec["user"], want_cmd, rec.get("client"))
        if got != want:
            bad.append(f"{rec['what']}: vless.session {sid} says {got}, the client did {want}")
        port = rec.get("dest_port")
        dest = s.get("dest", "")
        if (port is None and dest != "v1.mux.cool") or (port is not None and not dest.endswith(f":{port}")):
            bad.append(f"{rec['what']}: vless.session {sid} dest {dest!r}, the client asked port {port}")
        if not rec["complete"]:
            continue
        if rec["kind"] == "http" and (s.get("bytes_up") != rec["bytes_up"]
                                     or http_by_session.get((sid, None), 0) != rec["http"]):
            bad.append(f"{rec['what']}: session {sid}: {s.get('bytes_up')} bytes up, "
                       f"{http_by_session.get((sid, None), 0)} requests logged; the client sent {rec['bytes_up']} "
                       f"and got {rec['http']} answers")
        if rec["kind"] in ("udp", "dns"):
            n = rec[rec["kind"]]
            logged = (udp_by_session if rec["kind"] == "udp" else dns_by_session).get((sid, None), 0)
            if (s.get("packets_up"), s.get("packets_down"), logged) != (n, n, n):
                bad.append(f"{rec['what']}: session {sid}: packets {s.get('packets_up')}/{s.get('packets_down')}, "
                           f"{logged} logged at the target; the client got {n} answers")
        if rec["kind"] == "mux":
            if s.get("subs") != len(rec["subs"]):
                bad.append(f"{rec['what']}: session {sid}: {s.get('subs')} subs logged, the client opened {len(rec['subs'])}")
            for num, srec in rec["subs"].items():
                line = subs.get((sid, num))
                if line is None:
                    bad.append(f"{rec['what']}: sub {num} of session {sid} has no vless.sub line")
                    continue
                got = (line.get("mux_id"), line.get("net"), line.get("user"), line.get("listener"))
                want = (srec["mid"], srec["net"], rec["user"], rec["listener"])
                if got != want or not line.get("dest", "").endswith(f":{srec['port']}"):
                    bad.append(f"{rec['what']}: vless.sub {sid}/{num} says {got} {line.get('dest')}, the client did "
                               f"{want} port {srec['port']}")
                counts = (http_by_session.get((sid, num), 0), udp_by_session.get((sid, num), 0),
                          dns_by_session.get((sid, num), 0))
                if counts != (srec["http"], srec["udp"], srec["dns"]):
                    bad.append(f"{rec['what']}: sub {sid}/{num}: logged (http, udp, dns) {counts}, the client got "
                               f"{(srec['http'], srec['udp'], srec['dns'])}")
                if srec["net"] == "tcp" and line.get("bytes_up") != srec["bytes_up"]:
                    bad.append(f"{rec['what']}: sub {sid}/{num}: {line.get('bytes_up')} bytes up, the client sent "
                               f"{srec['bytes_up']}")
    # Every session or sub the log names in a relayed answer line is one a client saw.
    for k in list(http_by_session) + list(dns_by_session) + list(udp_by_session):
        if k[0] not in tally.sessions:
            bad.append(f"the log names session {k} in an answer line, which no client saw")
            break
    figures = {"logged_http": logged_http, "sessions_checked": checked,
               "udp_ports_shared": len(udp_peers.get("direct", set()) & udp_peers.get("vless", set()))}
    return bad, figures


def run_property(threads: int, seed: int) -> None:
    run = f"rp{threads}"
    rng = random.Random(seed)
    print(f"seed {seed} (repeat with {SEED_ENV}={seed - threads})", flush=True)
    cfg = make_config(threads, "kernel")
    pool = GrpcPool()
    tally = Tally()
    with h.Daemon(cfg) as d:
        deadline = time.monotonic() + SECONDS
        def worker(fn, i, *extra):
            return threading.Thread(target=guarded, args=(tally, fn, run, i, deadline, tally, random.Random(rng.random()),
                                                          *extra))
        workers = [worker(session_worker, i, pool) for i in range(SESSION_WORKERS)]
        workers += [worker(direct_worker, i) for i in range(DIRECT_WORKERS)]
        workers += [worker(direct_udp_worker, i) for i in range(DIRECT_UDP_WORKERS)]
        for w in workers:
            w.start()
        # Reloads while it runs: the ACK policy flips, which every open connection picks up.
        # (Written and signalled without waiting for each config.reload: reading the growing log
        # under this load would slow the loop; all of them are checked at the end.)
        reloads = 0
        while time.monotonic() < deadline:
            time.sleep(0.25)
            d.write_config(make_config(threads, "on" if reloads % 2 == 0 else "kernel") | {"log": d.cfg["log"]})
            d.signal(signal.SIGHUP)
            reloads += 1
        for w in workers:
            w.join(timeout=30)
            h.check(not w.is_alive(), "a worker did not finish")
        pool.close()
        # The log's view, whole: the daemon stopped (every session, sub and UDP flow has its line).
        d.stop()
        events = h.read_events(d.access)
        h.check(not d.unexpected_exceptions(), "unexpected exceptions in the daemon's log")
    bad, figures = check_log(events, run, tally)
    mislabels = tally.mislabels + len(bad)
    by_transport: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for key, n in tally.answers.items():
        carrier, kind = key.split("/")
        transport = CARRIERS[carrier][2] or "tls"
        by_transport[transport] = by_transport.get(transport, 0) + n
        by_kind[kind] = by_kind.get(kind, 0) + n
    t = f"route_proof.threads{threads}"
    for name, n in sorted(by_transport.items()):
        print(f"FIGURE {t}.answers.{name} = {n}", flush=True)
    for name, n in sorted(by_kind.items()):
        print(f"FIGURE {t}.answers.{name.replace('-', '_')} = {n}", flush=True)
    for name, n in tally.direct.items():
        print(f"FIGURE {t}.answers.direct_{name} = {n}", flush=True)
    print(f"FIGURE {t}.sessions = {len(tally.sessions)}", flush=True)
    print(f"FIGURE {t}.sessions_checked_in_log = {figures['sessions_checked']}", flush=True)
    print(f"FIGURE {t}.grpc_connections = {pool.made}", flush=True)
    print(f"FIGURE {t}.reloads = {reloads}", flush=True)
    print(f"FIGURE {t}.io_failures = {tally.io_failures}", flush=True)
    if tally.io_examples:
        print("  I/O failures, e.g. " + "; ".join(tally.io_examples), flush=True)
    print(f"FIGURE {t}.mislabels = {mislabels}", flush=True)
    h.check(not tally.errors, f"route proof violated (client view): {tally.violations}\n" + "\n".join(tally.errors))
    h.check(not bad, f"{len(bad)} disagreements between the log and the clients:\n" + "\n".join(bad[:20]))
    for name in ("tls", "ws", "httpupgrade", "grpc"):
        h.check(by_transport.get(name, 0) >= 20, f"too few answers over {name}: {by_transport}")
    for kind in ("http", "udp", "dns", "mux-http", "mux-udp", "mux-dns"):
        h.check(by_kind.get(kind, 0) >= 5, f"too few {kind} answers: {by_kind}")
    h.check(tally.direct["http"] > 100 and min(tally.direct.values()) >= 10, f"too little direct traffic: {tally.direct}")
    done = [e for e in events if e.get("event") == "config.reload"]
    h.check(len(done) == reloads and all(e["ok"] for e in done), f"{reloads} reloads sent, logged: {done}")
    h.check(not [e for e in events if e.get("event") == "log.dropped"], "access-log lines dropped")

    # The hazard was really there: local ports that a direct client and a relayed connection both
    # used (at some point) on this run, over TCP and over UDP.
    reqs = [e for e in events if e.get("event") == "http.request" and e.get("run") == run]
    direct_ports = {e["peer"].rsplit(":", 1)[1] for e in reqs if e.get("path_label") == "direct"}
    relayed_ports = {e["peer"].rsplit(":", 1)[1] for e in reqs if e.get("path_label") != "direct"}
    shared = direct_ports & relayed_ports
    # (of 48: connect() takes even ports first, so TCP clients mostly share the 24 even ones)
    print(f"FIGURE {t}.shared_tcp_ports = {len(shared)}", flush=True)
    print(f"FIGURE {t}.shared_udp_ports = {figures['udp_ports_shared']}", flush=True)
    h.check(len(shared) >= 10, "the run did not make direct and relayed connections share local ports")
    h.check(figures["udp_ports_shared"] >= 5, "the run did not make direct and relayed datagrams share source ports")


@suite.test
def route_proof_single_thread():
    run_property(1, seed=BASE + 1)


@suite.test
def route_proof_threads():
    n = h.THREADS or 2
    run_property(n, seed=BASE + n)


@suite.test
def udp_subs_on_one_relay_port_keep_their_own_labels():
    """UDP sub-connections of one mux session, one after the other, all on the same relay port (the
    namespace's range cut to that one port while they run): each echo names its own sub, as its
    vless.sub line does. The echo target compared only the session when a peer address came back,
    so the second sub's echoes said sub=1 (the property run found it at threads = 2)."""
    name, uuid = USERS[0]
    ports = Path("/proc/sys/net/ipv4/ip_local_port_range")
    echoes: dict[int, tuple] = {}
    with h.Daemon(make_config(1, "kernel")) as d:
        with h.TlsClient(VLESS_PORTS[1], timeout=10) as c:
            c.handshake()
            demux = MuxDemux(c)
            c.send(h.vless_header(uuid, 0, cmd=3))
            old = ports.read_text()
            ports.write_text(f"{PORT_RANGE[1]} {PORT_RANGE[1]}\n")  # the one port every relay socket gets
            try:
                mid = 20
                for k in range(3):
                    for _ in range(50):  # a New is refused while the previous sub's socket holds the port
                        mid += 1
                        data = padded(f"one-port.{k}.{mid}")
                        c.send(mux_frame(mid, NEW, data, mux_target(UDP_ECHO, "127.0.0.1", 2)))
                        if mid == 21:
                            h.read_vless_response_header(c.stream)
                        answer = demux.pull(mid)
                        if answer:
                            break
                        time.sleep(0.02)
                    h.check(answer, f"sub {k + 1}: every New refused")
                    echoes[mid] = echo_trailer(data, answer)
                    c.send(mux_frame(mid, END))
                    d.wait_event("vless.sub", mux_id=mid)  # closed: its port is free again
            finally:
                ports.write_text(old)
            c.close_notify()
            c.stream.read_to_eof()
    subs = {e["mux_id"]: e for e in d.events("vless.sub")}
    flows = d.events("udp.packet")
    print(f"  {len(echoes)} subs on relay ports {sorted({f['peer'] for f in flows})}: "
          + ", ".join(f"mux id {m} -> {r}" for m, (_, r) in echoes.items()), flush=True)
    h.check(len({f["peer"] for f in flows}) == 1, f"not one relay port: {flows}")
    for mid, got in echoes.items():
        s = subs[mid]
        want = ("udp", f"vless session={s['session']} sub={s['sub']} user={name}")
        h.check(got == want, f"mux id {mid}: echo {got}, its vless.sub line {s}")
    h.check(len({subs[m]["sub"] for m in echoes}) == len(echoes), "the subs have distinct numbers")


BASE = seed_base()

if __name__ == "__main__":
    h.require_binary()
    h.run_in_own_netns(addresses=[LAN], port_range=PORT_RANGE)
    suite.run()
