"""A reload changes what the kernel does on a VLESS session that stays open (issue 27 item 2).

The promise "toggle the ACK mode via config reload" (docs/configuration.md) covers connections that
are already open: a connection applies its listener's tcp_policy after every read
(core/net/policy_stream.hpp, server/transport/tls_stream.hpp), and a reload updates that policy in place
(core/runtime/listener_runtime.hpp). One Nagle-prone keep-alive session (TCP_NODELAY off, every request
written as two TLS records, so the second waits for the daemon's ACK of the first) stays open while
the listener goes quickack = "kernel" -> "on" -> "kernel":

- "kernel": the daemon delays its ACK (Linux: ~40 ms on loopback), so most requests stall;
- "on": the daemon sets TCP_QUICKACK after each read, the ACK goes out at once, no request stalls.

Thresholds are stall counts, not medians: a stall is a whole delayed-ACK timeout (>= 40 ms on
Linux), far beyond what a loaded machine adds to a loopback round trip. The kernel's own view: the
test runs in a network namespace of its own and counts the ACKs the kernel sent from its
delayed-ACK timer (TcpExt DelayedACKs in /proc/net/netstat, per namespace) in each phase. `ss -tin`
of the daemon's socket is printed for the record; it shows `ato:40` in every phase (tcp_info has
no quickack state), so it cannot tell "on" from "kernel". This test fails against a daemon that
reads the policy only at accept (docs/reliability.md, "Surfaces and who proves them (issue 27)").
"""
import shutil
import subprocess
import time
from pathlib import Path

from harness import (SANITIZED, Daemon, Suite, TlsClient, check, free_port, policy, read_vless_response_header,
                     require_binary, route_session, run_in_own_netns, vless_header)

suite = Suite("test_ack_reload")
require_binary()
if SANITIZED:
    print("SKIP: test_ack_reload measures a stall; timings are not meaningful under sanitizers")
    raise SystemExit(77)
# Its own namespace: the kernel's delayed-ACK counter (TcpExt DelayedACKs) is per namespace, so
# there it counts this test's connections only.
run_in_own_netns(timeout=120)

WARMUP = 1        # per phase: the first request after a reload settles the socket's ACK state
REQUESTS = 10     # counted per phase
STALL_MS = 20.0   # a delayed ACK on loopback is ~40 ms; a quick round trip well under 5 ms
VLESS_PORT = free_port()
TARGET_PORT = free_port()


def config(quickack: str) -> dict:
    return {
        "users": [{"name": "nagle", "uuid": "5d7f0a52-5a4c-4a0e-9d56-3f5a7a3c3b1e"}],
        "vless": [{"name": "live", "listen": f"127.0.0.1:{VLESS_PORT}", "tcp": policy(True, quickack),
                   # The daemon's own leg to its target never waits on Nagle: only the client's
                   # socket is Nagle-prone, so only the listener's ACK policy decides the stall.
                   "upstream_tcp": policy(True, "kernel")}],
        "target": [{"name": "http", "listen": f"127.0.0.1:{TARGET_PORT}"}],
    }


D = Daemon(config("kernel"))


def request_parts(seq: int, phase: str) -> tuple[bytes, bytes]:
    """A keep-alive GET cut after the request line: two small writes, two TLS records."""
    head = b"GET /generate_204 HTTP/1.1\r\n"
    rest = (f"Host: 127.0.0.1\r\nX-Vlessbench-Run: ack-reload\r\nX-Vlessbench-Path: {phase}\r\n"
            f"X-Vlessbench-Seq: {seq}\r\n\r\n").encode()
    return head, rest


class Session:
    """The one open session: TLS 1.3 + VLESS to the daemon's target, HTTP/1.1 keep-alive."""

    def __init__(self):
        self.c = TlsClient(VLESS_PORT, nodelay=False, timeout=5.0)
        self.c.handshake()
        self.seq = 0
        # The VLESS header goes with a first request (one write), off the clock.
        head, rest = request_parts(self.seq, "open")
        self.c.send(vless_header(D.uuid, TARGET_PORT) + head + rest)
        read_vless_response_header(self.c.stream)
        resp = self.c.stream.read_response()
        check(resp.status == 204, resp)
        self.route = resp.headers["x-vlessbench-route"]
        check(self.route.startswith("vless session="), self.route)
        self.client_port = self.c.sock.getsockname()[1]

    def timed_request(self, phase: str) -> float:
        """Milliseconds from the first write of a request to its complete response."""
        self.seq += 1
        head, rest = request_parts(self.seq, phase)
        t0 = time.perf_counter()
        self.c.send(head)   # goes out at once: nothing of ours is unacknowledged
        self.c.send(rest)   # Nagle holds it until the daemon ACKs the first record
        resp = self.c.stream.read_response()
        ms = (time.perf_counter() - t0) * 1000.0
        check(resp.status == 204, resp)
        # Every response comes over the same session: the route names the session accepted first.
        check(resp.headers["x-vlessbench-route"] == self.route, (resp.headers, self.route))
        return ms

    def phase(self, name: str) -> tuple[list[float], int]:
        """REQUESTS timed requests after WARMUP, and how many delayed ACKs the kernel sent meanwhile."""
        for _ in range(WARMUP):
            self.timed_request(name + "-warmup")
        before = delayed_acks()
        samples = [self.timed_request(name) for _ in range(REQUESTS)]
        return samples, delayed_acks() - before

    def kernel_view(self) -> str:
        """`ss -tin` of the daemon's end of this connection (its ato, rtt, ...), or why not."""
        ss = shutil.which("ss")
        if not ss:
            return "(no ss)"
        r = subprocess.run([ss, "-tinH", "state", "established", "( sport = :%d and dport = :%d )"
                            % (VLESS_PORT, self.client_port)], capture_output=True, text=True, timeout=10)
        return " ".join(r.stdout.split()) or f"(ss found nothing: {r.stderr.strip()})"


def delayed_acks() -> int:
    """The namespace's count of ACKs the kernel sent from its delayed-ACK timer (TcpExt DelayedACKs)."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines() if line.startswith("TcpExt:")]
    names, values = lines[0], lines[1]
    return int(values[names.index("DelayedACKs")])


def stalls(samples: list[float]) -> int:
    return sum(1 for ms in samples if ms > STALL_MS)


def show(name: str, samples: list[float], delacks: int, view: str) -> None:
    print(f"  {name:8s} stalls {stalls(samples):2d}/{len(samples)}, kernel delayed ACKs {delacks:2d}; ms: "
          + " ".join(f"{ms:.1f}" for ms in samples), flush=True)
    print(f"  {'':8s} ss (daemon side): {view}", flush=True)


def reload_to(quickack: str) -> None:
    cfg = config(quickack)
    cfg["log"], cfg["admin"] = D.cfg["log"], D.cfg["admin"]  # the same access log, admin still off
    ev = D.reload(cfg)
    check(ev.get("ok") is True, ev)


@suite.test
def reload_toggles_the_ack_mode_of_an_open_session():
    s = Session()
    phases = []
    for name, quickack in (("kernel", None), ("on", "on"), ("kernel", "kernel")):
        if quickack:
            reload_to(quickack)
        samples, delacks = s.phase(name)
        show(name, samples, delacks, s.kernel_view())
        phases.append((name, samples, delacks))
    s.c.close()

    need = (REQUESTS * 8) // 10
    for i, (name, samples, delacks) in enumerate(phases):
        when = ("before the reloads", "after the reload to on", "after the reload back to kernel")[i]
        if name == "kernel":
            check(stalls(samples) >= need, f"quickack=kernel {when}: only {stalls(samples)} of {REQUESTS} requests "
                                           f"stalled over {STALL_MS} ms: {samples}")
            check(delacks >= need, f"quickack=kernel {when}: the kernel sent only {delacks} delayed ACKs "
                                   f"for {REQUESTS} requests")
        else:
            check(stalls(samples) == 0, f"quickack=on {when}: {stalls(samples)} of {REQUESTS} requests on the open "
                                        f"session still stalled over {STALL_MS} ms (policy read only at accept?): "
                                        f"{samples}")
            # The ACK went out from the read, not from the timer; one timer ACK elsewhere (the
            # client's side of a response) is tolerated.
            check(delacks <= 1, f"quickack=on {when}: the kernel sent {delacks} delayed ACKs for {REQUESTS} requests")

    # One session carried all of it, and the daemon says so when it closes.
    sid = route_session(s.route)
    ev = D.wait_event("vless.session", session=sid)
    check(ev["listener"] == "live", ev)
    check(len(D.events("vless.session")) == 1, D.events("vless.session"))


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
