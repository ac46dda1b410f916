"""Helpers shared by the load and fault tests (tests/integration/test_load.py, test_faults.py) and
soak.sh: the load generator (vlessbench_load sessions), descriptor limits, the daemon's RSS and CPU time, direct latency.

Standard library only; builds on the harness package (tests/integration/harness/).
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
import harness  # noqa: E402

LOAD = harness.CLIENT_BIN / "vlessbench_load"


def raise_nofile() -> int:
    """Soft RLIMIT_NOFILE up to the hard one (children inherit it); returns the limit.

    Raising the hard limit needs CAP_SYS_RESOURCE, which a container may not grant: then the hard
    limit (often 20000 there) caps how many sessions one daemon can hold.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1 << 17
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        return want
    except (ValueError, OSError):
        pass
    if hard == resource.RLIM_INFINITY:
        hard = want
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


# --------------------------------------------------------------------------------------------
# /proc figures

rss_kib = harness.rss_kib
cpu_seconds = harness.cpu_seconds


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# --------------------------------------------------------------------------------------------
# Latency of a direct request: new TCP connection, GET, whole response

def direct_get_seconds(port: int, path: str = "/", timeout: float = 5.0) -> float:
    t0 = time.perf_counter()
    with harness.tcp_connect(port, timeout=timeout) as s:
        s.sendall(harness.http_request("GET", path, headers={"Connection": "close"}))
        resp = harness.plain_stream(s).read_response()
    elapsed = time.perf_counter() - t0
    harness.check(resp.status // 100 == 2, f"direct GET {path}: {resp.status}")
    return elapsed


def direct_median_ms(port: int, n: int = 50, pause: float = 0.005) -> float:
    samples = []
    for _ in range(n):
        samples.append(direct_get_seconds(port))
        time.sleep(pause)
    return harness.median_ms(samples)


# --------------------------------------------------------------------------------------------
# vlessbench_load sessions

class LoadRun:
    """`vlessbench_load sessions` as a child process; its JSON lines are collected as they arrive."""

    def __init__(self, daemon: harness.Daemon, listener: str, dest_port: int, *args, hold_stdin: bool = False):
        if not LOAD.exists():
            raise RuntimeError(f"vlessbench_load not found at {LOAD} (build the vlessbench_load target)")
        argv = [LOAD, "sessions", "--server", f"{harness.LOOPBACK}:{daemon.port(listener)}", "--uuid", daemon.uuid,
                "--target", f"{harness.LOOPBACK}:{dest_port}", *args]
        self.stderr_path = harness.tempdir("vlessbench-load-") / "stderr.log"
        self.proc = harness.spawn(argv, stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=open(self.stderr_path, "wb"))
        self.lines: list[dict] = []
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            with self._cv:
                self.lines.append(obj)
                self._cv.notify_all()

    def wait_line(self, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for line in self.lines:
                    if line.get("event") == event:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"vlessbench_load: no {event!r} line within {timeout}s "
                                         f"(rc {self.proc.poll()}): {self.stderr()[-2000:]}")
                self._cv.wait(min(left, 0.2))

    def release(self) -> None:
        """Closes stdin: idle sessions are let go."""
        if self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def finish(self, timeout: float) -> dict:
        self.release()
        done = self.wait_line("done", timeout)
        self.proc.wait(timeout=10)
        return done

    def stop(self) -> None:
        harness.stop_process(self.proc, signal.SIGTERM, 5)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def target_only_daemon() -> harness.Daemon:
    """A second vlessbenchd serving only an HTTP target: a destination that can be killed."""
    return harness.Daemon(cfg={"target": [{"name": "http", "listen": f"{harness.LOOPBACK}:{harness.free_port()}"}]})


def figure(name: str, value) -> None:
    """One measured figure, in a form docs/reliability.md quotes (grep FIGURE)."""
    print(f"FIGURE {name} = {value}", flush=True)


def wait_count(daemon: harness.Daemon, event: str, count: int, timeout: float, **match) -> list[dict]:
    """Waits until the access log holds at least count events of this kind; returns them."""
    deadline = time.monotonic() + timeout
    while True:
        found = daemon.events(event, **match)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def mark_after_probes(daemon: harness.Daemon) -> int:
    """A log mark after the start-up port probes (plain TCP connects the harness makes to see the
    listeners open; each VLESS listener logs one as tls_handshake_failed)."""
    probes = len(daemon.cfg.get("vless", []))
    wait_count(daemon, "vless.reject", probes, timeout=3)
    return daemon.mark()
