"""Ports: free ones, waiting until a process accepts on them, and the kernel's view (`ss`) of the
connections on one, the evidence the tests wait for instead of sleeping."""
from __future__ import annotations

import random
import socket
import subprocess
import time

from .env import LOOPBACK

# Where the daemon listens, write ANY_PORT ("127.0.0.1:0"): the daemon binds a port the kernel
# picks and reports it (--ports-file, docs/configuration.md "Port 0"), and Daemon.port(name) reads
# it. free_port is for the ports that must be known before a process starts (a v2ray inbound, a
# config that points at another process): it cannot keep another process from taking the port
# before it is bound, so Daemon.start() retries on "address in use" with a new one (bounded).

ANY_PORT = f"{LOOPBACK}:0"

PROTOCOLS = ("tcp", "udp", "tcp+udp")
_given_ports: dict[str, set[int]] = {"tcp": set(), "udp": set()}


# Below the kernel's ephemeral range (ip_local_port_range, 32768 up by default): Xray does not
# bind a port a TIME-WAIT connection holds (../shared/peers/README.md), and an outgoing
# connection's source port is never taken from here.
LOW_PORTS = (20000, 32767)


def free_port(host: str = LOOPBACK, proto: str = "tcp", low: bool = False) -> int:
    """A port free a moment ago for proto ("tcp", "udp", or "tcp+udp": both, as a [[dns]] takes),
    never given twice for the same protocol: bind 0, read, release. low: a random one in
    LOW_PORTS instead (a core's inbound), bound and not accepting."""
    if proto not in PROTOCOLS:
        raise ValueError(f"proto {proto!r}: one of {PROTOCOLS}")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    kinds = [k for k in ("tcp", "udp") if k in proto.split("+")]
    types = {"tcp": socket.SOCK_STREAM, "udp": socket.SOCK_DGRAM}
    for _ in range(200 if low else 50):
        want = random.randint(*LOW_PORTS) if low else 0
        if low and any(want in _given_ports[k] for k in kinds):
            continue
        with socket.socket(fam, types[kinds[0]]) as first:
            try:
                first.bind((host, want))
            except OSError:
                continue
            port = first.getsockname()[1]
            if any(port in _given_ports[k] for k in kinds):
                continue
            if len(kinds) == 2:
                try:
                    with socket.socket(fam, types[kinds[1]]) as second:
                        second.bind((host, port))
                except OSError:
                    continue
        if low and "tcp" in kinds and port_open(port, host):
            continue
        for k in kinds:
            _given_ports[k].add(port)
        return port
    raise RuntimeError(f"no free {proto} port found{' in %d-%d' % LOW_PORTS if low else ''}")


def was_given(port: int, proto: str) -> bool:
    """Whether free_port gave port for every protocol of proto ("tcp", "udp", "tcp+udp")."""
    return all(port in _given_ports[k] for k in proto.split("+"))


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect((host, port))
            return True
        except OSError:
            return False


def wait_ports(ports, host: str = LOOPBACK, timeout: float = 15.0, proc: subprocess.Popen | None = None,
               what: str = "process") -> None:
    """Waits until every port accepts; a port may also be given as (host, port)."""
    deadline = time.monotonic() + timeout
    pending = [p if isinstance(p, tuple) else (host, p) for p in ports]
    while pending:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before its ports opened")
        pending = [(h, p) for h, p in pending if not port_open(p, h)]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: ports {pending} not accepting after {timeout}s")
        time.sleep(0.05)


def _ss_endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def tcp_connections(port: int) -> list[dict]:
    """The established TCP connections accepted on port in this network namespace (`ss -tin`):
    each as {"local", "peer", "recv_q", "bytes_received", "bytes_acked", "peer_bytes_sent"}
    (bytes_acked: what the server sent and the peer's kernel acknowledged; peer_bytes_sent: what
    the connecting side sent, when that side is in this namespace too, else None)."""
    out = subprocess.run(["ss", "-tinHO", "state", "established", f"( sport = :{port} or dport = :{port} )"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        info = dict(kv.split(":", 1) for kv in f[4:] if ":" in kv and kv.split(":", 1)[0].isidentifier())
        rows.append({"recv_q": int(f[0]), "local": _ss_endpoint(f[2]), "peer": _ss_endpoint(f[3]),
                     "bytes_received": int(info.get("bytes_received", 0)),
                     "bytes_acked": int(info.get("bytes_acked", 0)),
                     # bytes_sent counts retransmitted bytes again (a spurious retransmission on a
                     # loaded machine): what the peer can have received is the difference.
                     "bytes_sent": int(info.get("bytes_sent", 0)) - int(info.get("bytes_retrans", 0))})
    by_local = {r["local"]: r for r in rows}
    server = []
    for r in rows:
        if r["local"][1] != port:
            continue
        client = by_local.get(r["peer"])
        server.append({"local": r["local"], "peer": r["peer"], "recv_q": r["recv_q"],
                       "bytes_received": r["bytes_received"], "bytes_acked": r["bytes_acked"],
                       "peer_bytes_sent": client["bytes_sent"] if client else None})
    return server


def wait_server_read(port: int, with_data: int, total: int | None = None, timeout: float = 10.0) -> list[dict]:
    """Waits until the server on port has read everything its clients sent (the kernel's evidence:
    receive queue empty, bytes received = bytes the client side sent) on every connection it
    accepted, at least with_data of them carried bytes, and (if given) exactly total are open.
    The evidence that requests are in the server's hands, instead of a sleep."""
    deadline = time.monotonic() + timeout
    first = None
    while True:
        conns = tcp_connections(port)
        first = conns if first is None else first
        read_all = all(c["recv_q"] == 0 and c["peer_bytes_sent"] in (None, c["bytes_received"]) for c in conns)
        carried = sum(1 for c in conns if c["bytes_received"] > 0)
        if read_all and carried >= with_data and (total is None or len(conns) == total):
            return conns
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: wanted {with_data} connections read to the end"
                                 f"{f' of {total}' if total is not None else ''} within {timeout} s:\nfirst {first}\nlast {conns}")
        time.sleep(0.02)


def wait_sender_stalled(port: int, timeout: float = 20.0, still: int = 10) -> list[dict]:
    """Waits until the server on port has stopped getting its bytes through to a client that does
    not read: on every connection it accepted, at least one byte acknowledged and bytes_acked the
    same for `still` polls in a row (20 ms apart). The evidence that a relay's buffers between
    that server and a stalled reader are full (backpressure reached the source), instead of a
    sleep before measuring what the stall costs."""
    deadline = time.monotonic() + timeout
    last, same, conns = None, 0, []
    while True:
        conns = tcp_connections(port)
        now = sorted((c["peer"], c["bytes_acked"]) for c in conns)
        same = same + 1 if now == last and conns and all(a > 0 for _, a in now) else 0
        if same >= still:
            return conns
        last = now
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: the server still gets bytes through after {timeout} s: {now}")
        time.sleep(0.02)


def wait_server_closed(port: int, timeout: float = 10.0) -> None:
    """Waits until the server on port holds no accepted connection: none established, none in
    CLOSE-WAIT (the client's FIN arrived, the server has not closed its side yet). The evidence
    that an earlier case's connections are gone from the server too, instead of a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ss", "-tanH", "state", "established", "state", "close-wait", "state", "syn-recv",
                              f"( sport = :{port} )"], capture_output=True, text=True, timeout=10, check=True).stdout
        if not out.strip():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: the server still holds connections after {timeout} s:\n{out}")
        time.sleep(0.02)

