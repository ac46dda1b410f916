"""[limits] threads: VLESS sessions spread over several io_context threads.

Runs a daemon with threads = 2 (or VLESSBENCH_TEST_THREADS when larger) and checks that the
worker threads exist and carry sessions, that concurrent sessions relay and are proven in the
target's log, that a reload under load keeps every request, that a drain stops every thread, and
that a reload changing the thread count is refused. The TSan tree runs this file too.
"""
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "load"))
import loadkit  # noqa: E402
from harness import SANITIZED, THREADS, Daemon, Suite, check, require_binary  # noqa: E402

suite = Suite("test_threads")
require_binary()
N = max(2, THREADS)
ACTIVE = 40 if SANITIZED else 200
REQUESTS = 5


def threaded_daemon() -> Daemon:
    d = Daemon(limits={"threads": N}, start=False)
    d.cfg["log"]["level"] = "warn"
    d.write_config(d.cfg)
    return d.start()


def thread_wakeups(pid: int) -> dict[str, int]:
    """Voluntary context switches per thread name: an io_context thread blocks in epoll_wait
    between events, so one that serves sessions counts many; an idle one stays asleep. (CPU
    ticks are too coarse: 10 ms each.)"""
    out: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                out[name] = out.get(name, 0) + int(line.split()[1])
    return out


def run_active(d: Daemon, requests: int = REQUESTS) -> dict:
    load = loadkit.LoadRun(d, "kernel", d.target_port, "--active", ACTIVE, "--requests", requests,
                           "--opening", 64, "--timeout", 30)
    try:
        return load.finish(timeout=120)
    finally:
        load.stop()


@suite.test
def sessions_run_on_every_thread():
    d = threaded_daemon()
    try:
        names = thread_wakeups(d.proc.pid)
        workers = [f"vlessbenchd-{i}" for i in range(1, N)]
        check(all(w in names for w in workers), f"threads {sorted(names)}; expected {workers}")
        before = thread_wakeups(d.proc.pid)
        done = run_active(d)
        after = thread_wakeups(d.proc.pid)
        busy = {w: after.get(w, 0) - before.get(w, 0) for w in workers}
        loadkit.figure("threads_worker_wakeups", busy)
        check(done["requests_failed"] == 0 and done["open_failed"] == 0, done)
        check(done["requests_ok"] == ACTIVE * REQUESTS, done)
        # Round robin: every worker thread got sessions to serve (ACTIVE / N of them, each with
        # a handshake and REQUESTS round trips), so it woke up many times.
        check(all(t >= ACTIVE // N for t in busy.values()), f"a worker thread did no work: {busy}")
        sessions = loadkit.wait_count(d, "vless.session", ACTIVE, timeout=30)
        check(len(sessions) == ACTIVE, f"{len(sessions)} vless.session lines for {ACTIVE} sessions")
        ids = [s["session"] for s in sessions]
        check(len(set(ids)) == ACTIVE, "session ids are unique across threads")
        relayed = d.events("http.request", route="vless")
        check(len(relayed) == ACTIVE * REQUESTS, f"{len(relayed)} relayed requests logged")
        check({r["vless_session"] for r in relayed} == set(ids), "every request names its session")
    finally:
        d.stop()


@suite.test
def reload_under_load_loses_nothing():
    d = threaded_daemon()
    try:
        stop = threading.Event()
        sent = [0]

        def hup():
            while not stop.is_set():
                d.signal(signal.SIGHUP)
                sent[0] += 1
                time.sleep(0.1)

        t = threading.Thread(target=hup)
        t.start()
        ok = runs = 0
        try:
            # Load runs back to back until at least 10 reloads landed during them (bounded).
            while sent[0] < 10 and runs < 50:
                done = run_active(d)
                runs += 1
                check(done["requests_failed"] == 0 and done["open_failed"] == 0, done)
                ok += done["requests_ok"]
        finally:
            stop.set()
            t.join(timeout=5)
        check(sent[0] >= 10, f"only {sent[0]} SIGHUPs during the load")
        check(ok == runs * ACTIVE * REQUESTS, f"{ok} requests ok of {runs * ACTIVE * REQUESTS}")
        reloads = loadkit.wait_count(d, "config.reload", sent[0], timeout=15)
        check(all(r["ok"] for r in reloads), [r for r in reloads if not r["ok"]][:3])
        loadkit.figure("threads_reloads_requests_ok", f"{len(reloads)} / {ok}")
    finally:
        d.stop()


@suite.test
def reload_cannot_change_the_thread_count():
    d = threaded_daemon()
    try:
        mark = d.mark()
        cfg = d.cfg
        cfg["limits"]["threads"] = N + 1
        d.write_config(cfg)
        d.signal(signal.SIGHUP)
        e = d.wait_event("config.reload", since=mark)
        check(e["ok"] is False and "limits.threads" in e["error"] and "restart" in e["error"], e)
        # The old generation keeps serving.
        check(loadkit.direct_get_seconds(d.target_port) < 5.0)
    finally:
        d.stop()


@suite.test
def sigterm_stops_every_thread():
    d = threaded_daemon()
    load = loadkit.LoadRun(d, "kernel", d.target_port, "--idle", 50, "--opening", 50, "--timeout", 30,
                           hold_stdin=True)
    try:
        ready = load.wait_line("ready", timeout=60)
        check(ready["opened"] == 50, ready)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=15)
        elapsed = time.monotonic() - t0
        loadkit.figure("threads_sigterm_exit_s", f"{elapsed:.2f}")
        check(rc == 0, f"exit code {rc}\n{d.stderr()}")
        check(not os.path.exists(f"/proc/{d.proc.pid}"), "process gone")
        sessions = loadkit.wait_count(d, "vless.session", 50, timeout=5)
        check(len(sessions) == 50, f"{len(sessions)} of 50 idle sessions logged their close")
    finally:
        load.stop()
        d.stop()


suite.run()
