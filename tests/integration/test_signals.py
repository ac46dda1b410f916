"""Signals and the config path (issue 16, item 7).

SIGUSR1 reopens the access-log file (logrotate's convention), SIGUSR2 and SIGALRM are logged and
ignored, SIGPIPE is ignored, SIGQUIT drains like SIGTERM; none of them ends the daemon without a
word. A config path that is not a regular file (a FIFO) is refused at once at start, by --check
and at a reload, where the daemon keeps serving.
"""
import os
import signal
import time

from harness import (Daemon, Suite, check, http_request, plain_stream, read_events, require_binary, run_daemon,
                     tcp_connect, tempdir, toml_text, vless_get)

suite = Suite("test_signals")
require_binary()


def direct_get(d: Daemon, seq: str) -> None:
    with tcp_connect(d.target_port) as s:
        stream = plain_stream(s)
        stream.send(http_request("GET", "/generate_204", headers={"X-Vlessbench-Seq": seq, "Connection": "close"}))
        r = stream.read_response()
        check(r.status == 204, r)


def seqs(path) -> list[str]:
    return [e["seq"] for e in read_events(path) if e["event"] == "http.request" and "seq" in e]


def wait_seq(path, seq: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while seq not in seqs(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"request {seq} not logged in {path} within {timeout} s: {seqs(path)}")
        time.sleep(0.02)


@suite.test
def ignored_signals_are_logged_and_survived():
    with Daemon() as d:
        for sig, line in ((signal.SIGUSR2, "signal SIGUSR2: ignored"), (signal.SIGALRM, "signal SIGALRM: ignored"),
                          (signal.SIGPIPE, None)):
            d.signal(sig)
            if line:
                d.wait_stderr(line)
            # SIGPIPE is ignored outright (SIG_IGN): no line to wait for. The kernel decides at
            # kill() time (a fatal default action takes the process down then), so requests the
            # daemon answers after it are the evidence that it survived.
            direct_get(d, sig.name)
            r, _ = vless_get(d.port("kernel"), d.uuid, d.target_port, "/generate_204")
            check(r.status == 204, f"VLESS after {sig.name}: {r}")
            check(d.running(), f"{sig.name} ended the daemon: {d.stderr()[-1000:]}")
        check(d.stop() == 0, "exit code")


@suite.test
def sigusr1_reopens_the_access_log_file():
    with Daemon() as d:
        direct_get(d, "before")
        wait_seq(d.access, "before")
        rotated = d.access.with_suffix(".1")
        d.access.rename(rotated)  # what logrotate does before it signals
        direct_get(d, "renamed")  # still written to the renamed file: nothing reopened it yet
        wait_seq(rotated, "renamed")
        d.signal(signal.SIGUSR1)
        d.wait_stderr(f"signal SIGUSR1: reopened access log {d.access}")
        check(d.access.exists(), "no new file at the configured path")
        direct_get(d, "after")
        wait_seq(d.access, "after")
        check(seqs(rotated) == ["before", "renamed"], f"rotated file: {seqs(rotated)}")
        check(seqs(d.access) == ["after"], f"new file: {seqs(d.access)}")
        check(oct(d.access.stat().st_mode & 0o777) == oct(0o640), "new file mode")
        check(d.stop() == 0, "exit code")


@suite.test
def sigusr1_that_cannot_reopen_keeps_the_old_file():
    with Daemon() as d:
        rotated = d.access.with_suffix(".1")
        d.access.rename(rotated)
        d.access.mkdir()  # the path is now a directory: open(2) fails
        d.signal(signal.SIGUSR1)
        d.wait_stderr("signal SIGUSR1: access log")
        check(d.running(), "the daemon ended")
        direct_get(d, "kept")
        wait_seq(rotated, "kept")
        check(d.stop() == 0, "exit code")


@suite.test
def sigusr1_with_stdout_is_a_no_op():
    d = Daemon(start=False)
    d.cfg["log"]["access"] = "stdout"
    d.write_config(d.cfg)
    with d.start():
        d.signal(signal.SIGUSR1)
        d.wait_stderr("signal SIGUSR1: the access log is stdout: nothing to reopen")
        direct_get(d, "stdout")
        check(d.stop() == 0, "exit code")
        check(b'"seq":"stdout"' in d.stdout_path.read_bytes(), "the line after SIGUSR1 went missing")


@suite.test
def sigquit_drains_like_sigterm():
    with Daemon() as d:
        direct_get(d, "q")
        d.signal(signal.SIGQUIT)
        d.proc.wait(timeout=10)
        check(d.proc.returncode == 0, f"exit code {d.proc.returncode}")
        check("signal SIGQUIT: draining" in d.stderr(), d.stderr()[-1000:])
        check("vlessbenchd stopped" in d.stderr(), "no orderly stop")


def make_fifo() -> str:
    path = tempdir() / "vlessbenchd.toml"
    os.mkfifo(path)
    return str(path)


@suite.test
def fifo_config_is_refused_by_check_and_at_start():
    fifo = make_fifo()
    for args in (["--check", "--config", fifo], ["--config", fifo]):
        # A daemon waiting for a FIFO's writer would never exit: run_daemon's timeout fails it
        # (nobody opens the FIFO for writing), so no clock is read here.
        r = run_daemon(args, timeout=10)
        check(r.returncode == 1, f"{args}: exit {r.returncode}")
        check(f"{fifo}: cannot read: not a regular file" in r.stderr, f"{args}: {r.stderr}")


@suite.test
def fifo_config_at_reload_is_refused_and_the_daemon_keeps_serving():
    with Daemon() as d:
        good = toml_text(d.cfg)
        d.config_path.unlink()
        os.mkfifo(d.config_path)
        d.signal(signal.SIGHUP)
        ev = d.wait_event("config.reload")
        check(ev["ok"] is False and ev["generation"] == 1, ev)
        check("not a regular file" in ev["error"], ev)
        direct_get(d, "after-fifo")
        r, _ = vless_get(d.port("kernel"), d.uuid, d.target_port, "/generate_204")
        check(r.status == 204, r)
        d.config_path.unlink()
        d.config_path.write_text(good)
        ev = d.reload(good)
        check(ev["ok"] is True and ev["generation"] == 2, ev)
        check(d.stop() == 0, "exit code")


if __name__ == "__main__":
    suite.run()
