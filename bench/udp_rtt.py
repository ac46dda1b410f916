"""UDP round trips for bench/run.py (issue 12): one datagram at a time to the [[udp_target]] echo,
straight (the direct floor) or through a SOCKS5 UDP ASSOCIATE (RFC 1928) of a v2ray client, whose
outbound carries it as VLESS command 2 (or as a Mux.Cool UDP sub-connection) to a server under test.

"new" = a new flow and its first datagram, as the runner times it for udp:// (docs/runner.md): a
new UDP socket (a new source port, so the v2ray client opens a new outbound: TCP + TLS + VLESS
header, or a new mux sub) and, through SOCKS5, a new control connection and UDP ASSOCIATE, timed
from the start of that to the echo. "reuse" = a later datagram on one flow kept for the whole run. Paths are interleaved at random per round, as
the runner does; each round's sample minus the direct path's sample of the same round is the
paired difference, summarised as the runner does (median, percentile-bootstrap 95% CI of the
median, 2000 resamples; quantiles type 7).

Every echo is checked: the payload must come back with the target's trailer
(core/wire/route_header.hpp format_udp_echo, "\\nVLESSBENCH-UDP LISTENER ROUTE"), which takes the place
of the room each datagram leaves for it (ECHO_ROOM). The route is "direct"
on every path because the target is its own process (as the HTTP target is: --allow-mismatch).
Python's own cost is in the direct path's figures (its median is the floor every Δ removes) and in
client_cpu_us_per_datagram (this process's CPU over the reuse samples of the direct path).

Every wait is bounded (per-datagram timeout); a path that fails `give_up` times in a row is
abandoned with its error, never measured as a number.
"""
from __future__ import annotations

import random
import resource
import socket
import statistics
import time

# tests/integration/harness/ (bench/run.py and the tests put it on sys.path): SOCKS5 UDP, the echo's trailer.
from harness import LOOPBACK, UDP_ECHO_MARKER, UDP_ECHO_ROOM, socks5_udp_associate, socks5_udp_header

HOST = LOOPBACK
MARKER = UDP_ECHO_MARKER
# The echo is never longer than the datagram: its trailer replaces the datagram's last bytes, so each
# datagram carries this much room for it (core/wire/route_header.hpp udp_echo_room).
ECHO_ROOM = b"." * UDP_ECHO_ROOM


def quantile(sorted_values: list[float], q: float) -> float:
    """Type 7 (linear between closest ranks), as core/wire/quantile.hpp."""
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_median_ci(values: list[float], seed: int, resamples: int = 2000) -> tuple[float, float] | None:
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    return quantile(meds, 0.025), quantile(meds, 0.975)


class Flow:
    """One UDP flow to the echo target: direct (socks_port None) or through a SOCKS5 relay."""

    def __init__(self, echo_port: int, socks_port: int | None, timeout: float):
        self.echo_port = echo_port
        self.ctl = None
        self.relay = (HOST, echo_port)
        self.prefix = b""
        if socks_port is not None:
            self.ctl, self.relay = socks5_udp_associate(socks_port, timeout)
            self.prefix = socks5_udp_header(echo_port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)
        self.seq = 0

    def round_trip(self, size: int) -> float:
        """Seconds from sendto to the (checked) echo of one datagram of `size` payload bytes."""
        self.seq += 1
        body = (b"%08d:" % self.seq).ljust(size, b"x")
        msg = self.prefix + body + ECHO_ROOM
        t0 = time.perf_counter()
        self.sock.sendto(msg, self.relay)
        while True:  # a late echo of an earlier (timed-out) datagram is skipped, within the timeout
            data = self.sock.recv(65535)
            took = time.perf_counter() - t0
            if not data.startswith(self.prefix):
                raise OSError(f"unexpected SOCKS5 UDP header {data[:10]!r}")
            data = data[len(self.prefix):]
            at = data.rfind(MARKER)
            if at < 0:
                raise OSError(f"echo without the target's trailer: {data[-40:]!r}")
            if data[:at].startswith(body):
                return took
            if data[:9] < body[:9] and data[:8].isdigit():  # an earlier datagram's echo, late
                continue
            raise OSError(f"echo payload differs: {data[:at][:20]!r}")

    def close(self) -> None:
        self.sock.close()
        if self.ctl:
            self.ctl.close()


def packets_per_second(echo_port: int, socks_port: int | None, seconds: float, window: int = 16,
                       size: int = 64, timeout: float = 1.0) -> dict:
    """Closed loop with `window` datagrams in flight on one flow for `seconds`: echoes per second.
    A datagram whose echo does not come within `timeout` is counted lost (the window shrinks by
    one). This Python client's CPU share is returned too: near 1.0 means it set the pace."""
    f = Flow(echo_port, socks_port, timeout)
    try:
        f.round_trip(size)  # the flow's first datagram (for a proxy: the outbound is open after it)
        msg = f.prefix + b"p".ljust(size, b"x") + ECHO_ROOM
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        stop = t0 + seconds
        for _ in range(window):
            f.sock.sendto(msg, f.relay)
        got = lost = 0
        outstanding = window
        while outstanding:
            try:
                data = f.sock.recv(65535)
            except socket.timeout:
                lost += outstanding
                break
            if MARKER not in data:
                raise OSError(f"echo without the target's trailer: {data[-40:]!r}")
            got += 1
            outstanding -= 1
            if time.perf_counter() < stop:
                f.sock.sendto(msg, f.relay)
                outstanding += 1
        took = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        f.close()
    return {"per_second": got / took, "echoes": got, "lost": lost, "seconds": took, "window": window,
            "client_cpu_share": (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / took}


def measure(paths: dict[str, int | None], echo_port: int, new: int, reuse: int, warmup: int,
            size: int = 64, timeout: float = 2.0, give_up: int = 5, seed: int | None = None) -> dict:
    """paths: name -> SOCKS5 port (None: direct, the baseline, must be named "direct")."""
    seed = seed if seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    names = list(paths)
    kept: dict[str, Flow | None] = {}
    dead: dict[str, str] = {}
    streak = {n: 0 for n in names}
    samples = {n: {"new": [], "reuse": []} for n in names}  # per round: seconds or None
    errors: dict[str, dict[str, int]] = {n: {} for n in names}
    cpu = [0.0, 0]

    def fail(name: str, mode: str, e: Exception) -> None:
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        errors[name][why] = errors[name].get(why, 0) + 1
        samples[name][mode].append(None)
        streak[name] += 1
        if streak[name] >= give_up:
            dead[name] = f"{give_up} failures in a row, last: {why}"

    def one(name: str, mode: str, record: bool) -> None:
        if name in dead:
            if record:
                samples[name][mode].append(None)
            return
        try:
            if mode == "new":
                t0 = time.perf_counter()
                f = Flow(echo_port, paths[name], timeout)
                try:
                    took = time.perf_counter() - t0 + f.round_trip(size)
                finally:
                    f.close()
            else:
                if kept.get(name) is None:
                    kept[name] = Flow(echo_port, paths[name], timeout)
                    kept[name].round_trip(size)  # the flow's first datagram is a "new" one
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                took = kept[name].round_trip(size)
                if name == "direct" and record:
                    r1 = resource.getrusage(resource.RUSAGE_SELF)
                    cpu[0] += r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                    cpu[1] += 1
        except Exception as e:  # noqa: BLE001 - every failure is counted with its reason
            if mode == "reuse" and kept.get(name) is not None:
                kept[name].close()
                kept[name] = None
            if record:
                fail(name, mode, e)
            elif mode == "new":
                streak[name] += 1
                if streak[name] >= give_up:
                    dead[name] = f"{give_up} failures in a row (warm-up), last: {type(e).__name__}: {e}"
            return
        streak[name] = 0
        if record:
            samples[name][mode].append(took)

    t0 = time.monotonic()
    try:
        for _ in range(warmup):
            for name in rng.sample(names, len(names)):
                one(name, "new", False)
                one(name, "reuse", False)
        for r in range(max(new, reuse)):
            for name in rng.sample(names, len(names)):
                if r < new:
                    one(name, "new", True)
                if r < reuse:
                    one(name, "reuse", True)
    finally:
        for f in kept.values():
            if f is not None:
                f.close()

    out: dict = {"seed": seed, "size": size, "seconds": round(time.monotonic() - t0, 2),
                 "client_cpu_us_per_datagram": cpu[0] * 1e6 / cpu[1] if cpu[1] else None, "paths": {}}
    for k, name in enumerate(names):
        res: dict = {}
        for m, mode in enumerate(("new", "reuse")):
            got = samples[name][mode]
            ok = sorted(x * 1e3 for x in got if x is not None)
            r = {"n": len(ok), "failed": len(got) - len(ok), "median_ms": None, "p95_ms": None,
                 "paired_delta_median_ms": None, "paired_delta_ci_low_ms": None, "paired_delta_ci_high_ms": None}
            if ok:
                r["median_ms"], r["p95_ms"] = quantile(ok, 0.5), quantile(ok, 0.95)
            if name == "direct":
                r["paired_delta_median_ms"] = r["paired_delta_ci_low_ms"] = r["paired_delta_ci_high_ms"] = 0.0
            else:
                base = samples["direct"][mode]
                deltas = [(a - b) * 1e3 for a, b in zip(got, base) if a is not None and b is not None]
                if deltas:
                    r["paired_delta_median_ms"] = statistics.median(deltas)
                    lo, hi = bootstrap_median_ci(deltas, seed * 31 + k * 2 + m)
                    r["paired_delta_ci_low_ms"], r["paired_delta_ci_high_ms"] = lo, hi
            res[mode] = r
        res["errors"] = errors[name]
        if name in dead:
            res["error"] = dead[name]
        out["paths"][name] = res
    return out


def format_table(res: dict) -> str:
    lines = [f"{'path':<22} {'mode':<5} {'ok':>4} {'fail':>4} {'median':>8} {'p95':>8} {'paired Δ':>9}  95% CI"]
    for name, p in res["paths"].items():
        if "new" not in p:
            lines.append(f"{name:<22} FAILED: {p['error']}")
            continue
        for mode in ("new", "reuse"):
            r = p[mode]
            f = (lambda v, sign=False: "-" if v is None else (f"{v:+.3f}" if sign else f"{v:.3f}"))
            ci = ("-" if r["paired_delta_ci_low_ms"] is None else
                  f"[{r['paired_delta_ci_low_ms']:+.3f}, {r['paired_delta_ci_high_ms']:+.3f}]")
            lines.append(f"{name:<22} {mode:<5} {r['n']:>4} {r['failed']:>4} {f(r['median_ms']):>8} "
                         f"{f(r['p95_ms']):>8} {f(r['paired_delta_median_ms'], True):>9}  {ci}")
        if "error" in p:
            lines.append(f"{'':<22} FAILED: {p['error']}")
    return "\n".join(lines)
