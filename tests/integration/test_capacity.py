"""Admission: who gets the daemon's capacity. Silent and slow peers against good clients.

- Pending connections (a VLESS connection before its header is authorised, a target connection
  before its first request head) have their own bound ([limits] max_pending, pending_timeout_ms):
  held open in numbers, they must not lock out a good client doing VLESS requests at the same time.
  The good client's success rate and latency during the attack are printed as FIGURE lines
  (docs/reliability.md quotes them).
- The daemon's own VLESS listeners are no destination (no session nested through itself).
- A transfer in progress must keep a minimum rate ([limits] min_rate_bytes per min_rate_window_ms);
  an Expect: 100-continue request the target will not read the body of is answered at once.

Every loop is bounded in count and time; everything stays on 127.0.0.1.
"""
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import (ANY_PORT, SANITIZED, Daemon, Suite, TlsClient, check, http_request, new_uuid,
                     plain_stream, read_vless_response_header, require_binary, tcp_connect, vless_get,
                     vless_header)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "load"))
from loadkit import figure, open_fds, raise_nofile  # noqa: E402

suite = Suite("test_capacity")
require_binary()
SLACK = 3.0 if SANITIZED else 1.0
GOOD_REQUESTS = 40


class SilentFlood:
    """Opens `hold` silent TCP connections to port at once, then one more every `every` seconds
    until stopped; never sends a byte. The daemon may close any of them (that is the point)."""

    def __init__(self, port: int, hold: int, every: float = 0.02, limit: int = 2000):
        self.port, self.every, self.limit = port, every, limit
        self.socks: list[socket.socket] = []
        self.opened = 0
        self.failed = 0
        self._stop = threading.Event()
        for _ in range(hold):
            self._open()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            self.socks.append(s)
            self.opened += 1
        except OSError:
            self.failed += 1

    def _run(self) -> None:
        while not self._stop.wait(self.every) and self.opened + self.failed < self.limit:
            self._open()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in self.socks:
            s.close()


def wait_accepted(port: int, timeout: float = 10.0) -> None:
    """Until the daemon has accepted every connection the kernel completed on port (the listening
    socket's accept queue, ss's Recv-Q, is empty): the flood is in the daemon's hands, not queued."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ss", "-ltnH", f"( sport = :{port} )"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
        queued = [int(line.split()[1]) for line in out.splitlines() if line.split()]
        if queued and not any(queued):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"accept queue of :{port} not drained within {timeout} s: {out}")
        time.sleep(0.02)


def good_client(d: Daemon, n: int, vless: str = "kernel", timeout: float = 5.0, pause: float = 0.02):
    """n new VLESS sessions, one GET /generate_204 each, `pause` s apart (so that the attack goes
    on meanwhile); returns (ok, latencies in s, failures)."""
    ok, lat, failures = 0, [], []
    for i in range(n):
        if i:
            time.sleep(pause)
        try:
            resp, dt = vless_get(d.port(vless), d.uuid, d.target_port, "/generate_204", timeout=timeout)
            if resp.status == 204:
                ok += 1
                lat.append(dt)
            else:
                failures.append(f"status {resp.status}")
        except (OSError, EOFError, AssertionError, ValueError) as e:
            failures.append(f"{type(e).__name__}: {e}")
    return ok, lat, failures


def report(name: str, n: int, ok: int, lat: list) -> None:
    figure(f"{name}_success", f"{ok} / {n} ({100.0 * ok / n:.1f} %)")
    if lat:
        lat_ms = sorted(x * 1000 for x in lat)
        p95 = lat_ms[min(len(lat_ms) - 1, int(0.95 * len(lat_ms)))]
        figure(f"{name}_latency_ms", f"p50 {statistics.median(lat_ms):.2f}, p95 {p95:.2f}, max {lat_ms[-1]:.2f}")


# --------------------------------------------------------------------------------------------
# Item 8: pending connections never take authenticated capacity


@suite.test
def silent_vless_connections_do_not_take_session_slots():
    # 60 silent connections against max_sessions = 50: they used to count from accept and lock
    # everyone out until the handshake timeout (10 s). Only authorised sessions count now.
    d = Daemon(limits={"max_sessions": 50})
    flood = None
    try:
        ok, lat, _ = good_client(d, 10)
        report("silent_vless_baseline", 10, ok, lat)
        raise_nofile()
        flood = SilentFlood(d.port("kernel"), hold=60, every=0.05)
        wait_accepted(d.port("kernel"))
        ok, lat, failures = good_client(d, GOOD_REQUESTS)
        report("silent_vless_over_max_sessions", GOOD_REQUESTS, ok, lat)
        check(ok == GOOD_REQUESTS, f"good client: {ok}/{GOOD_REQUESTS} ok; {failures[:3]}; "
                                   f"rejects: {[e['reason'] for e in d.events('vless.reject')][-5:]}")
        check(not d.events("vless.reject", reason="too_many_sessions"), "silent connections took session slots")
        # The capacity itself still holds for authorised sessions: 50 held, the 51st refused.
        holders = []
        try:
            for _ in range(50):
                c = TlsClient(d.port("kernel")).handshake()
                c.send(vless_header(d.uuid, d.target_port) + http_request("GET", "/generate_204"))
                read_vless_response_header(c.stream)
                check(c.stream.read_response().status == 204)
                holders.append(c)
            mark = d.mark()
            ok51, _, _ = good_client(d, 1)
            check(ok51 == 0, "a 51st authorised session was admitted")
            e = d.wait_event("vless.reject", since=mark, reason="too_many_sessions")
            check(e["phase"] in ("accept", "header"), e)
        finally:
            for c in holders:
                c.close()
    finally:
        if flood:
            flood.stop()
        d.stop()


@suite.test
def pending_cap_evicts_the_oldest_and_keeps_good_clients_working():
    # 100 silent connections held against max_pending = 20, more arriving every 20 ms throughout:
    # the oldest pending connection is closed for each new one, so the good client (the newest,
    # done in a few ms) always gets through.
    d = Daemon(limits={"max_pending": 20})
    flood = None
    try:
        raise_nofile()
        mark = d.mark()
        t0 = time.monotonic()
        flood = SilentFlood(d.port("kernel"), hold=100, every=0.02)
        wait_accepted(d.port("kernel"))
        ok, lat, failures = good_client(d, GOOD_REQUESTS)
        elapsed = time.monotonic() - t0
        report("pending_cap_attack", GOOD_REQUESTS, ok, lat)
        deadline = time.monotonic() + 3 * SLACK  # each line is written when its session has closed
        while True:
            evicted = d.events("vless.reject", since=mark, reason="evicted")
            if len(evicted) >= 80 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        figure("pending_cap_attack_evicted", f"{len(evicted)} silent connections evicted, "
                                             f"{flood.opened} opened by the attacker in {elapsed:.1f} s")
        check(ok == GOOD_REQUESTS, f"good client: {ok}/{GOOD_REQUESTS} ok; {failures[:3]}")
        check(len(evicted) >= 80, f"only {len(evicted)} evictions for {flood.opened} silent connections")
        check(all(e["phase"] == "tls" and e["bytes_seen"] == 0 for e in evicted), evicted[:3])
        check(d.running() and not d.unexpected_exceptions(), d.stderr()[-2000:])
    finally:
        if flood:
            flood.stop()
        d.stop()


@suite.test
def pending_timeout_bounds_the_whole_pre_auth_phase():
    # handshake and header deadlines of 5 s each, a pending deadline of 1 s: a client that
    # completes the handshake and then trickles its header is cut 1 s after accept.
    d = Daemon(limits={"handshake_timeout_ms": 5000, "header_timeout_ms": 5000, "pending_timeout_ms": 1000})
    try:
        mark = d.mark()
        t0 = time.monotonic()
        with TlsClient(d.port("kernel")) as c:
            c.handshake()
            c.send(vless_header(d.uuid, d.target_port)[:5])
            c.sock.settimeout(5 + SLACK)
            check(c.stream.at_eof(), "not closed")
        dt = time.monotonic() - t0
        figure("pending_timeout_cut_s", f"{dt:.2f}")
        check(0.9 < dt < 1.0 + SLACK, f"closed after {dt:.2f} s")
        e = d.wait_event("vless.reject", since=mark, reason="header_timeout")
        check(e["bytes_seen"] == 5, e)
        # A silent direct connection to the target: cut at the pending deadline, not idle_timeout.
        t0 = time.monotonic()
        with tcp_connect(d.target_port, timeout=5 + SLACK) as s:
            check(plain_stream(s).at_eof(), "silent target connection not closed")
        dt = time.monotonic() - t0
        figure("pending_timeout_target_cut_s", f"{dt:.2f}")
        check(0.9 < dt < 1.0 + SLACK, f"silent target connection closed after {dt:.2f} s")
    finally:
        d.stop()


@suite.test
def silent_target_connections_do_not_starve_vless_users():
    # Under a low descriptor limit, 300 silent connections to the target used to hold every
    # descriptor for idle_timeout_ms (300 s): VLESS users got fd_exhausted / connect_failed.
    # Pending connections may hold at most half the descriptor limit now.
    d = Daemon()
    flood = None
    try:
        pid = d.proc.pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))
        ok, lat, _ = good_client(d, 10)
        report("silent_target_baseline", 10, ok, lat)
        raise_nofile()
        flood = SilentFlood(d.target_port, hold=300, every=0.02)
        wait_accepted(d.target_port)
        ok, lat, failures = good_client(d, GOOD_REQUESTS)
        fds = open_fds(pid)
        report("silent_target_nofile64", GOOD_REQUESTS, ok, lat)
        figure("silent_target_nofile64_daemon_fds", f"{fds} of 64 ({flood.opened} silent connections opened)")
        check(ok == GOOD_REQUESTS, f"good client: {ok}/{GOOD_REQUESTS} ok; {failures[:3]}; "
                                   f"rejects: {[e['reason'] for e in d.events('vless.reject')][-5:]}")
        check(fds <= 64, fds)
        # A direct request still works too (it is the newest pending connection).
        with tcp_connect(d.target_port) as s:
            s.sendall(http_request("GET", "/generate_204", headers={"Connection": "close"}))
            check(plain_stream(s).read_response().status == 204)
    finally:
        if flood:
            flood.stop()
        d.stop()


# --------------------------------------------------------------------------------------------
# Item 9: no relay to self


@suite.test
def relay_to_own_vless_listener_is_refused():
    # Even with every destination allowed, a session must not nest another one through the
    # daemon's own VLESS port (on any local address).
    uid = new_uuid()
    d = Daemon({
        "users": [{"name": "alice", "uuid": uid}],
        "vless": [{"name": "kernel", "listen": ANY_PORT},
                  {"name": "quick", "listen": ANY_PORT}],
        "target": [{"name": "http", "listen": ANY_PORT}],
        "destinations": {"allow": ["0.0.0.0/0", "::/0"]},
    })
    try:
        kp, qp = d.port("kernel"), d.port("quick")
        for dest, port, shown in (("127.0.0.1", kp, f"127.0.0.1:{kp}"), ("127.0.0.1", qp, f"127.0.0.1:{qp}"),
                                  ("127.0.0.2", kp, f"127.0.0.2:{kp}"), ("0.0.0.0", qp, f"0.0.0.0:{qp}"),
                                  ("::ffff:127.0.0.1", kp, f"[::ffff:127.0.0.1]:{kp}"), ("::1", kp, f"[::1]:{kp}")):
            mark = d.mark()
            with TlsClient(kp) as c:
                c.handshake()
                c.send(vless_header(uid, port, dest) + http_request("GET", "/", headers={"Connection": "close"}))
                c.sock.settimeout(5)
                c.stream.read_to_eof()
            e = d.wait_event("vless.reject", since=mark,
                             pred=lambda x: x.get("reason") not in ("tls_handshake_failed",))
            check(e["reason"] == "dest_is_vless_listener" and e["phase"] == "connect", e)
            check(e["dest"] == shown and e["user"] == "alice", e)
        check(not d.events("vless.session"), "a session was relayed to the daemon's own VLESS port")
        resp, _ = vless_get(kp, uid, d.target_port, "/")  # the target stays reachable
        check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
    finally:
        d.stop()


# --------------------------------------------------------------------------------------------
# Item 10: slow trickle, and 404 before 100 Continue

RATE_LIMITS = {"min_rate_bytes": 1000, "min_rate_window_ms": 500, "idle_timeout_ms": 30000}


def trickle(sock: socket.socket, send, recv, stop_after: float, every: float = 0.1) -> tuple[bool, float]:
    """Sends one byte every `every` s (send/recv: over sock, plain or TLS) until the peer closes
    or stop_after s pass. Returns (closed by the peer, seconds)."""
    t0 = time.monotonic()
    sock.settimeout(every)
    while time.monotonic() - t0 < stop_after:
        try:
            send(b"x")
        except OSError:
            return True, time.monotonic() - t0
        try:
            if not recv(4096):
                return True, time.monotonic() - t0
        except socket.timeout:
            pass
        except (OSError, EOFError):
            return True, time.monotonic() - t0
    return False, time.monotonic() - t0


def small_buffer_socket(port: int) -> socket.socket:
    """A TCP connection whose receive buffer is 4 KiB: a peer that does not read stalls at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    return sock


@suite.test
def sink_trickle_is_cut_by_the_rate_rule():
    d = Daemon(limits=RATE_LIMITS)
    try:
        mark = d.mark()
        with tcp_connect(d.target_port) as s:
            s.sendall(b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 10)
            closed, dt = trickle(s, s.sendall, s.recv, stop_after=4 + SLACK)
        figure("sink_trickle_cut_s", f"{dt:.2f}")
        check(closed, f"a 10 B/s /sink upload still open after {dt:.1f} s")
        check(0.4 < dt < 1.5 + SLACK, f"cut after {dt:.2f} s (window 0.5 s)")
        e = d.wait_event("http.request", since=mark, path="/sink")
        check(e["status"] == 408 and e["error"] == "slow_transfer" and 10 <= e["bytes_in"] < 1000, e)
        # Above the minimum rate (20 KB/s against 2 KB/s), a slow upload completes.
        with tcp_connect(d.target_port) as s:
            s.sendall(b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 30000\r\n\r\n")
            for _ in range(15):
                s.sendall(b"y" * 2000)
                time.sleep(0.1)
            resp = plain_stream(s).read_response()
            check(resp.status == 200 and resp.body == b"30000\n", resp)
    finally:
        d.stop()


@suite.test
def sink_trickle_through_vless_is_cut_too():
    d = Daemon(limits=RATE_LIMITS)
    try:
        mark = d.mark()
        with TlsClient(d.port("kernel")) as c:
            c.handshake()
            c.send(vless_header(d.uuid, d.target_port) +
                   b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 10)
            closed, dt = trickle(c.sock, c.send, c.recv, stop_after=4 + SLACK)
        check(closed, f"a trickled /sink through VLESS still open after {dt:.1f} s")
        e = d.wait_event("http.request", since=mark, path="/sink")
        check(e["status"] == 408 and e["error"] == "slow_transfer" and e["route"] == "vless", e)
        s = d.wait_event("vless.session", since=mark)
        check(s["close_reason"] in ("upstream_eof", "upstream_error"), s)
    finally:
        d.stop()


def small_buffer_vless(d: Daemon, request: bytes, dest_port: int) -> TlsClient:
    """A VLESS session to dest_port whose client socket has a 4 KiB receive buffer."""
    c = TlsClient(0, sock=small_buffer_socket(d.port("kernel"))).handshake()
    c.send(vless_header(d.uuid, dest_port) + request)
    return c


@suite.test
def never_reading_client_is_cut_by_the_rate_rule():
    # It asks for 4 GiB, never reads, and sends a byte every 100 ms so that the relay is never
    # idle: the daemon's write towards it waits, and the client takes nothing. The destination is
    # a second daemon's target without a rate rule, so that only the relay's rule can end it.
    dest = Daemon({"target": [{"name": "http", "listen": ANY_PORT}]},
                  limits={"min_rate_bytes": 0, "idle_timeout_ms": 30000})
    d = Daemon(limits=RATE_LIMITS)
    try:
        mark = d.mark()
        with small_buffer_vless(d, http_request("GET", "/bytes/4294967296"), dest.target_port) as c:
            t0 = time.monotonic()
            closed = False
            while time.monotonic() - t0 < 5 + SLACK:
                time.sleep(0.1)
                try:
                    c.send(b"x")
                except OSError:
                    closed = True
                    break
                if d.events("vless.session", since=mark):
                    closed = True
                    break
            dt = time.monotonic() - t0
        figure("never_reading_client_cut_s", f"{dt:.2f}")
        check(closed, f"a client that never reads still held its relay after {dt:.1f} s")
        e = d.wait_event("vless.session", since=mark)
        check(e["close_reason"] == "slow_transfer", e)
        check(0.4 < dt < 1.5 + SLACK, f"cut after {dt:.2f} s (window 0.5 s: one to two windows)")
        # A slow reader above the minimum rate (~40 KB/s against 2 KB/s) gets everything.
        mark = d.mark()
        n = 120_000
        with small_buffer_vless(d, http_request("GET", f"/bytes/{n}", headers={"Connection": "close"}),
                                dest.target_port) as c:
            got = b""
            t0 = time.monotonic()
            while len(got) < n + 2 and time.monotonic() - t0 < 10:
                time.sleep(0.05)
                data = c.recv(2048)
                if not data:
                    break
                got += data
        check(len(got) > n, f"slow reader got {len(got)} bytes")
        e = d.wait_event("vless.session", since=mark)
        check(e["close_reason"] != "slow_transfer", e)
    finally:
        d.stop()
        dest.stop()


@suite.test
def never_reading_direct_client_is_cut_by_the_rate_rule():
    # The target's own response writes: GET /bytes/4 GiB, direct, never read.
    d = Daemon(limits=RATE_LIMITS)
    try:
        mark = d.mark()
        with small_buffer_socket(d.target_port) as sock:
            sock.sendall(http_request("GET", "/bytes/4294967296"))
            t0 = time.monotonic()
            e = None
            while time.monotonic() - t0 < 5 + SLACK and e is None:
                time.sleep(0.1)
                found = d.events("http.request", since=mark)
                e = found[0] if found else None
            dt = time.monotonic() - t0
        figure("never_reading_direct_client_cut_s", f"{dt:.2f}")
        check(e is not None, f"a direct client that never reads still held /bytes after {dt:.1f} s")
        check(e["error"] == "slow_transfer" and e["path"] == "/bytes/4294967296", e)
        check(0.4 < dt < 1.5 + SLACK, f"cut after {dt:.2f} s (window 0.5 s: one to two windows)")
        # A reader above the minimum rate gets a large body whole.
        with tcp_connect(d.target_port) as s:
            s.sendall(http_request("GET", "/bytes/3000000", headers={"Connection": "close"}))
            resp = plain_stream(s).read_response()
            check(resp.status == 200 and len(resp.body) == 3_000_000, resp)
    finally:
        d.stop()


@suite.test
def expect_100_continue_on_an_unknown_path_gets_the_404_first():
    d = Daemon()
    try:
        for path, status in (("/nope", 404), ("/", 405)):
            mark = d.mark()
            with tcp_connect(d.target_port) as s:
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n"
                          "Expect: 100-continue\r\n\r\n".encode())
                st = plain_stream(s)
                resp = st.read_response()
                check(resp.status == status, f"{path}: {resp.status} instead of {status} before the body")
                check(resp.headers.get("connection") == "close", resp)
                s.settimeout(2)
                check(st.at_eof(), "connection left open after refusing the body")
            e = d.wait_event("http.request", since=mark, path=path)
            check(e["status"] == status and "bytes_in" not in e, e)
        # /sink still invites its body.
        with tcp_connect(d.target_port) as s:
            s.sendall(b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            st = plain_stream(s)
            check(st.read_response().status == 100)
            s.sendall(b"hello")
            resp = st.read_response()
            check(resp.status == 200 and resp.body == b"5\n", resp)
    finally:
        d.stop()


if __name__ == "__main__":
    suite.run()
