"""The runner's endings: SIGINT/SIGTERM keep the samples so far (exit 130/143), a dead path fails the run (exit 3)."""
import csv
import json
import signal
import socket
import subprocess
import threading
import time

from harness import (CLIENT_BIN, LOOPBACK, Daemon, Suite, check, free_port, require_binary, spawn, stop_process,
                     tempdir)

suite = Suite("test_runner_exit")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
D = Daemon()
TARGET = f"http://{LOOPBACK}:{D.target_port}/"
WRONG_UUID = "11111111-1111-4111-8111-111111111111"


def link(user: str = "", insecure: bool = True) -> str:
    return (f"vless://{user or D.uuid}@{LOOPBACK}:{D.port('kernel')}?encryption=none&security=tls&sni=localhost"
            f"{'&allowInsecure=1' if insecure else ''}&type=tcp#kernel")


def runner(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def rows(out):
    with open(out / "samples.csv", newline="") as f:
        return list(csv.DictReader(f))


def wait_for(pred, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not pred():
        check(time.monotonic() < deadline, f"never: {what}")
        time.sleep(0.05)


def interrupted_run_keeps_its_samples(sig, rc: int, name: str, by_progress: bool = False) -> None:
    """SIGINT: sent once the daemon logged 40 of the run's requests; SIGTERM (by_progress): once the
    runner's own progress line (stderr is a pipe here, --progress-every 1) counted samples."""
    out = tempdir("vlessbench-int-")
    since = D.mark()
    proc = spawn([RUNNER, "run", "--target", TARGET, "--path", f"vl={link()}", "--new", 100000, "--reuse", 10,
                  "--warmup", 0, "--progress-every", 1, "--out", out],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    progress = lambda: [l for l in list(err_lines) if l.startswith("vlessbench: ") and " samples (" in l]
    try:
        if by_progress:
            wait_for(lambda: progress() or proc.poll() is not None, 60, "a progress line on stderr")
        else:
            wait_for(lambda: len(D.events("http.request", since=since)) >= 40 or proc.poll() is not None, 60,
                     "the run's requests in the access log")
        check(proc.poll() is None, f"the run ended by itself: {proc.returncode}")
        proc.send_signal(sig)
        stdout = proc.stdout.read()
        proc.wait(timeout=60)
        reader.join(timeout=10)
        stderr = "".join(err_lines)
    finally:
        stop_process(proc, signal.SIGKILL)
    if by_progress:
        check("ETA" in progress()[0] and "/200020 samples" in progress()[0], progress()[0])
    check(stdout.startswith("vlessbench run ") and ": 2 paths, 100000 new + 10 reused samples each after 0 "
          "warm-ups" in stdout.splitlines()[0], stdout[:300])
    check(proc.returncode == rc, f"rc {proc.returncode}, want {rc}\n{stdout[-2000:]}\n{stderr}")
    check(f"interrupted by {name}" in stderr, stderr)
    samples = rows(out)
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    check(run["interrupted"] == name and run["aborted"] is None, run)
    attempted = sum(p[m]["attempted"] for p in summary["paths"].values() for m in ("new", "reuse"))
    check(len(samples) >= 40 and len(samples) == run["samples"] == attempted, (len(samples), run["samples"], attempted))
    check(len(samples) < 2 * 100000, len(samples))
    check(all(s["ok"] == "1" for s in samples), [s for s in samples if s["ok"] != "1"][:3])  # none abandoned
    for p in ("direct", "vl"):
        n = sum(1 for s in samples if s["path"] == p)
        check(summary["paths"][p]["new"]["attempted"] == n, (p, n, summary["paths"][p]["new"]))
    svg = (out / "report.svg").read_text()
    check(f"interrupted by {name}" in svg, "the picture does not say it was interrupted")
    check(D.uuid not in (out / "summary.json").read_text(), "summary.json holds the UUID")
    check("vless://REDACTED@" in summary["paths"]["vl"]["spec"], summary["paths"]["vl"]["spec"])


@suite.test
def sigint_keeps_the_samples_so_far_and_exits_130():
    interrupted_run_keeps_its_samples(signal.SIGINT, 130, "SIGINT")


@suite.test
def sigterm_keeps_the_samples_so_far_and_exits_143():
    interrupted_run_keeps_its_samples(signal.SIGTERM, 143, "SIGTERM", by_progress=True)


@suite.test
def a_signal_cancels_the_sample_in_flight():
    # A SOCKS5 "proxy" that accepts and never answers, --timeout 600: only the cancel ends the sample.
    out = tempdir("vlessbench-int-")
    with socket.socket() as hole:
        hole.bind((LOOPBACK, 0))
        hole.listen(4)
        hole.settimeout(30)
        proc = spawn([RUNNER, "run", "--target", TARGET, "--path", f"silent=socks5://{LOOPBACK}:{hole.getsockname()[1]}",
                      "--new", 5, "--reuse", 0, "--warmup", 0, "--timeout", 600, "--out", out],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            conn, _ = hole.accept()  # the silent path's sample is in flight
            with conn:
                proc.send_signal(signal.SIGINT)
                stdout, stderr = proc.communicate(timeout=60)  # 10x less than the sample's own timeout
        finally:
            stop_process(proc, signal.SIGKILL)
    check(proc.returncode == 130, f"rc {proc.returncode}\n{stdout}\n{stderr}")
    check(not [s for s in rows(out) if s["path"] == "silent"], "the abandoned sample was recorded")


@suite.test
def a_dead_path_fails_the_run_with_its_name_and_a_hint():
    out = tempdir("vlessbench-dead-")
    r = runner("run", "--target", TARGET, "--path", f"wrong-uuid={link(WRONG_UUID)}",
               "--path", f"no-insecure={link(insecure=False)}", "--path", f"p=http://{LOOPBACK}:{free_port()}",
               "--path", f"good={link()}", "--new", 3, "--reuse", 3, "--warmup", 0, "--out", out,
               "--export-markdown", out / "table.md")
    check(r.returncode == 3, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    err = r.stderr
    for want in ("path wrong-uuid: 6/6 samples failed", "unknown_user",
                 "path no-insecure: 6/6 samples failed", "CERTIFICATE_VERIFY_FAILED", "allowInsecure=1",
                 "path p: 6/6 samples failed", "Connection refused", "proxy entry"):
        check(want in err, f"{want!r} not in\n{err}")
    check("path good" not in err and "path direct" not in err, err)
    md = (out / "table.md").read_text()
    check("| good | new | 3 | 0 |" in md and "| wrong-uuid | new | 0 | 3 |" in md, md)
    ev = D.wait_event("vless.reject", timeout=5, reason="unknown_user")  # the hint is what the daemon says
    check(ev, "no unknown_user reject logged")


@suite.test
def no_successful_sample_fails_whatever_the_share_and_help_lists_the_codes():
    # (The share itself: tests/unit/runner/test_runner_report.cpp, "failing paths".)
    out = tempdir("vlessbench-dead-")
    refused = f"r=http://{LOOPBACK}:{free_port()}"
    r = runner("run", "--target", TARGET, "--path", refused, "--new", 2, "--reuse", 0, "--warmup", 0, "--out", out,
               "--max-failed", 100)
    check(r.returncode == 3 and "path r: 2/2 samples failed" in r.stderr, (r.returncode, r.stderr))
    r = runner("--help")
    check("Exit codes" in r.stdout and "130/143" in r.stdout and "3 a path" in r.stdout, r.stdout)


suite.run()
