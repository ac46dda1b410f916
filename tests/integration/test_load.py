"""Load: many idle VLESS+TLS sessions and many active ones against the real vlessbenchd.

Driven by `vlessbench_load sessions` (bench/load/, C++, one thread): Python asyncio + ssl opened
only ~190 sessions/s on the two-core CI machine, too slow for 10,000 TLS handshakes within the
budget.

Knobs (environment): VLESSBENCH_LOAD_IDLE (default 10000, capped by the descriptor limit: the
daemon needs two descriptors per session), VLESSBENCH_LOAD_ACTIVE (default 2000),
VLESSBENCH_LOAD_REQUESTS (requests per active session, default 5). Figures are printed as
`FIGURE name = value` lines; docs/reliability.md quotes them.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "load"))
import loadkit  # noqa: E402
from harness import ONE_ADDRESS_LOAD, SANITIZED, Daemon, Suite, check, require_binary  # noqa: E402

suite = Suite("test_load")
require_binary()
NOFILE = loadkit.raise_nofile()
# Per session the daemon holds the client socket and the upstream socket (the destination is a
# separate process here, so the target's side of each session is not counted against the daemon).
IDLE_CAP = (NOFILE - 200) // 2
IDLE = min(loadkit.env_int("VLESSBENCH_LOAD_IDLE", 2000 if SANITIZED else 10000), IDLE_CAP)
ACTIVE = loadkit.env_int("VLESSBENCH_LOAD_ACTIVE", 300 if SANITIZED else 2000)
REQUESTS = loadkit.env_int("VLESSBENCH_LOAD_REQUESTS", 5)
HOLD = loadkit.env_int("VLESSBENCH_LOAD_HOLD", 0)  # seconds idle sessions stay open (soak.sh)


def quiet_daemon(**limits) -> Daemon:
    d = Daemon(limits={**ONE_ADDRESS_LOAD, **limits}, start=False)
    d.cfg["log"]["level"] = "warn"
    d.write_config(d.cfg)
    return d.start()


@suite.test
def idle_sessions_keep_the_daemon_responsive():
    if IDLE < loadkit.env_int("VLESSBENCH_LOAD_IDLE", 10000):
        loadkit.figure("idle_sessions_capped_by_nofile", f"{IDLE} (RLIMIT_NOFILE {NOFILE})")
    dest = loadkit.target_only_daemon()
    d = quiet_daemon()
    try:
        pid = d.proc.pid
        since = loadkit.mark_after_probes(d)
        base_ms = loadkit.direct_median_ms(d.target_port)
        rss0 = loadkit.rss_kib(pid)
        load = loadkit.LoadRun(d, "kernel", dest.target_port, "--idle", IDLE, "--opening", 256,
                               "--timeout", 30, hold_stdin=True)
        try:
            ready = load.wait_line("ready", timeout=150)
            check(ready["opened"] == IDLE and ready["open_failed"] == 0, ready)
            rss1 = loadkit.rss_kib(pid)
            fds = loadkit.open_fds(pid)
            loaded_ms = loadkit.direct_median_ms(d.target_port)
            # Up to two more tries: other work on a shared two-core machine can land on any one
            # measurement (the figure printed is the best of them).
            for _ in range(2):
                if loaded_ms <= 2 * base_ms:
                    break
                loaded_ms = min(loaded_ms, loadkit.direct_median_ms(d.target_port))
            per_session = (rss1 - rss0) / IDLE
            loadkit.figure("idle_sessions", IDLE)
            loadkit.figure("idle_open_s", ready["elapsed_s"])
            loadkit.figure("idle_open_ms_p50_p99", f"{ready['open_ms']['p50']} / {ready['open_ms']['p99']}")
            loadkit.figure("daemon_rss_kib_before_after", f"{rss0} / {rss1}")
            loadkit.figure("rss_per_idle_session_kib", f"{per_session:.1f}")
            loadkit.figure("daemon_fds_with_idle_sessions", fds)
            loadkit.figure("direct_median_ms_idle_vs_loaded", f"{base_ms:.3f} / {loaded_ms:.3f}")
            check(loaded_ms <= 2 * base_ms, f"direct median {loaded_ms:.3f} ms > 2 x {base_ms:.3f} ms")
            check(fds >= 2 * IDLE, f"daemon holds {fds} descriptors for {IDLE} sessions")
            check(d.running(), "daemon died")
            if HOLD:
                time.sleep(HOLD)
                check(loadkit.direct_median_ms(d.target_port) <= 2 * base_ms, "direct latency after the hold")
            done = load.finish(timeout=60)
            check(done["dropped"] == 0, f"the daemon dropped idle sessions: {done}")
        finally:
            load.stop()
        # Every session is logged once closed; the daemon is fine afterwards.
        sessions = loadkit.wait_count(d, "vless.session", IDLE, timeout=30)
        check(len(sessions) == IDLE, f"{len(sessions)} vless.session lines for {IDLE} sessions")
        check(len(d.events("vless.reject", since=since)) == 0, d.events("vless.reject", since=since)[:3])
        check(loadkit.direct_get_seconds(d.target_port) < 1.0, "direct request after the load")
    finally:
        d.stop()
        dest.stop()


@suite.test
def active_sessions_without_failures():
    d = quiet_daemon()
    try:
        pid = d.proc.pid
        cpu0 = loadkit.cpu_seconds(pid)
        load = loadkit.LoadRun(d, "kernel", d.target_port, "--active", ACTIVE, "--requests", REQUESTS,
                               "--opening", 256, "--timeout", 30)
        try:
            done = load.finish(timeout=150)
        finally:
            load.stop()
        cpu = loadkit.cpu_seconds(pid) - cpu0
        loadkit.figure("active_sessions", f"{ACTIVE} x {REQUESTS} requests")
        loadkit.figure("active_elapsed_s", done["elapsed_s"])
        loadkit.figure("active_requests_ok_failed", f"{done['requests_ok']} / {done['requests_failed']}")
        loadkit.figure("active_request_ms_p50_p99_max",
                       f"{done['request_ms']['p50']} / {done['request_ms']['p99']} / {done['request_ms']['max']}")
        loadkit.figure("active_daemon_cpu_s", f"{cpu:.2f}")
        check(done["requests_failed"] == 0 and done["open_failed"] == 0, done)
        check(done["requests_ok"] == ACTIVE * REQUESTS, done)
        sessions = loadkit.wait_count(d, "vless.session", ACTIVE, timeout=30)
        check(len(sessions) == ACTIVE, f"{len(sessions)} vless.session lines for {ACTIVE} sessions")
        requests = d.events("http.request", route="vless")
        check(len(requests) == ACTIVE * REQUESTS and all(r["status"] == 204 for r in requests),
              f"{len(requests)} relayed requests logged")
    finally:
        d.stop()


suite.run()
