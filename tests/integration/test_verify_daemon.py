"""`vlessbench verify --daemon` and `run --verify` (docs/runner.md, "Verify against a daemon in a
VM"): the runner fetches its run's lines from the daemon's admin listener (GET /api/log,
docs/dashboard.md), as it must when the daemon runs in a VM and its access log stays there. The
daemon listens on a non-loopback address, with an admin token, in a network namespace of the
test's own. Checked: a run with --verify passes and its fetched lines are exactly the run's lines
in the daemon's file; a UDP run verifies once its flows' lines are written; a wrong or missing
token is a clear error (exit 1 from verify, 4 from run --verify); a run id the log does not have
fails with the hint; bad queries get 400 with the reason, a log on stdout 409; a log with a
hundred thousand other lines streams with the daemon's memory unchanged; an answer without its
log.end line is refused as cut short; against stand-in admin listeners, an endless line is refused
at the line cap, a drip of keep-alive newlines ends at --fetch-timeout, and an honest answer whose
head and first 16 KiB of lines come in one read passes. Skipped (77) without root (namespace)."""
import json
import shutil
import socket
import subprocess
import threading
import time

from harness import (CLIENT_BIN, Daemon, Suite, check, free_port, http_request, new_uuid,
                     plain_stream, require_binary, rss_kib, run_in_own_netns, tcp_connect, tempdir, wait_ports)

LAN = "10.77.5.1"
run_in_own_netns(addresses=(LAN,))

suite = Suite("test_verify_daemon")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
UUID = new_uuid()
TOKEN = "verify-" + "5e" * 12
ADMIN_PORT = free_port(LAN)
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": f"{LAN}:{free_port(LAN)}"}],
    "target": [{"name": "http", "listen": f"{LAN}:{free_port(LAN)}"}],
    "udp_target": [{"name": "udp", "listen": f"{LAN}:{free_port(LAN, 'udp')}"}],
    "admin": {"listen": f"{LAN}:{ADMIN_PORT}", "token": TOKEN},
}, limits={"udp_idle_timeout_ms": 1000})
wait_ports([(LAN, ADMIN_PORT)], proc=D.proc, what="admin listener")
DAEMON = f"http://{LAN}:{ADMIN_PORT}"
LINK = (f"vless://{UUID}@{LAN}:{D.port('edge')}?encryption=none&security=tls&sni=localhost&allowInsecure=1"
        f"&type=tcp#edge")


def runner(*args, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def measured(target: str, *extra) -> tuple[subprocess.CompletedProcess, object]:
    out = tempdir("vlessbench-vd-")
    r = runner("run", "--target", target, "--path", f"vl={LINK}", "--new", 6, "--reuse", 6, "--warmup", 1,
               "--out", out, *extra)
    return r, out


def run_id(out) -> str:
    return json.loads((out / "summary.json").read_text())["run"]["id"]


def admin_get(path: str, headers: dict | None = None):
    with tcp_connect(ADMIN_PORT, LAN) as sock:
        sock.sendall(http_request("GET", path, host=LAN, headers=headers))
        return plain_stream(sock).read_response()


HTTP_RUN = {}


@suite.test
def run_with_verify_fetches_the_runs_lines_and_passes():
    r, out = measured(f"http://{LAN}:{D.target_port}/", "--verify", "--daemon", DAEMON, "--token", TOKEN)
    check(r.returncode == 0 and "verify: OK" in r.stdout, r.stdout[-3000:] + r.stderr)
    rid = run_id(out)
    check(f"fetched " in r.stderr and f"of run {rid} from {DAEMON}" in r.stderr, r.stderr)
    fetched = [json.loads(l) for l in (out / "daemon-log.jsonl").read_text().splitlines() if l]  # "": keep-alives
    own = [e for e in D.events("http.request") if e.get("run") == rid]
    # 2 paths x (6 + 6 samples + warm-ups): exactly the run's lines of the daemon's file, nothing else.
    check(len(own) >= 24 and [e for e in fetched if e["event"] != "log.end"] == own, (len(own), len(fetched)))
    check(fetched[-1]["event"] == "log.end" and fetched[-1]["complete"] is True
          and fetched[-1]["selected"] == len(own), fetched[-1])
    check(str(D.access) == fetched[-1]["file"], fetched[-1])
    HTTP_RUN["out"] = out
    HTTP_RUN["lines"] = len(own)


@suite.test
def a_wrong_or_missing_token_is_a_clear_error():
    if "out" not in HTTP_RUN:
        run_with_verify_fetches_the_runs_lines_and_passes()
    out = HTTP_RUN["out"]
    v = runner("verify", out, "--daemon", DAEMON, "--token", "not-the-token-at-all")
    check(v.returncode == 1 and f"the daemon's admin listener at {LAN}:{ADMIN_PORT} refused the token (401)" in v.stderr
          and "--token" in v.stderr, v.stdout + v.stderr)
    check("verify: OK" not in v.stdout, v.stdout)
    v = runner("verify", out, "--daemon", DAEMON)
    check(v.returncode == 1 and "refused a request without a token (401)" in v.stderr, v.stdout + v.stderr)
    # The token from the environment works as --token does.
    v = subprocess.run([str(RUNNER), "verify", str(out), "--daemon", DAEMON], capture_output=True, text=True,
                       timeout=60, env={"VLESSBENCH_ADMIN_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"})
    check(v.returncode == 0 and "verify: OK" in v.stdout, v.stdout + v.stderr)
    # run --verify: the measurement is fine, the verify is not: exit 4, the files written.
    r, out2 = measured(f"http://{LAN}:{D.target_port}/", "--verify", "--daemon", DAEMON, "--token", "wrong-token-xyz")
    check(r.returncode == 4 and "--verify: " in r.stderr and "refused the token (401)" in r.stderr,
          (r.returncode, r.stderr))
    check((out2 / "samples.csv").exists() and (out2 / "summary.json").exists())
    u = runner("run", "--target", f"http://{LAN}:{D.target_port}/", "--verify", "--new", 1, "--reuse", 0)
    check(u.returncode == 2 and "--daemon" in u.stderr, u.stderr)


@suite.test
def a_run_the_log_does_not_have_fails_with_the_hint():
    if "out" not in HTTP_RUN:
        run_with_verify_fetches_the_runs_lines_and_passes()
    other = tempdir("vlessbench-vd-other-")
    for name in ("samples.csv", "summary.json"):
        shutil.copy(HTTP_RUN["out"] / name, other / name)
    summary = json.loads((other / "summary.json").read_text())
    summary["run"]["id"] = "0123456789ab"
    (other / "summary.json").write_text(json.dumps(summary))
    v = runner("verify", other, "--daemon", DAEMON, "--token", TOKEN)
    check(v.returncode == 1 and "verify: FAILED" in v.stdout, v.stdout + v.stderr)
    check(f"hint: not one sample of run 0123456789ab is in the log of {DAEMON} ({D.access})" in v.stdout
          and "another daemon" in v.stdout, v.stdout)


@suite.test
def a_udp_run_verifies_once_its_flows_lines_are_written():
    r, out = measured(f"udp://{LAN}:{D.port('udp')}", "--verify", "--daemon", DAEMON, "--token", TOKEN)
    check(r.returncode == 0 and "verify: OK" in r.stdout and "udp.packet lines in the log: " in r.stdout,
          r.stdout[-3000:] + r.stderr)
    lines = [json.loads(l) for l in (out / "daemon-log.jsonl").read_text().splitlines()]
    check(any(e["event"] == "udp.packet" and e.get("route") == "vless" for e in lines), lines[:5])


@suite.test
def bad_queries_get_400_with_the_reason():
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for query, reason in (("", "run=ID is required"), ("?run=a%22b", "run must be a run id"),
                          ("?run=ab&events=http.request&since=2026-12-02T03:40:00Z", "events: only"),
                          ("?run=ab&events=udp.packet", "events and since go together")):
        resp = admin_get("/api/log" + query, auth)
        check(resp.status == 400 and b"bad /api/log query: " + reason.encode() in resp.body, (query, resp.status, resp.body))
    check(admin_get("/api/log?run=ab").status == 401)


@suite.test
def a_log_on_stdout_is_409_saying_what_to_set():
    port = free_port(LAN)
    d = Daemon({"users": [{"name": "alice", "uuid": UUID}],
                "target": [{"name": "http", "listen": f"{LAN}:{free_port(LAN)}"}],
                "admin": {"listen": f"{LAN}:{port}", "token": TOKEN}, "log": {"access": "stdout"}})
    wait_ports([(LAN, port)], proc=d.proc, what="admin listener")
    with tcp_connect(port, LAN) as sock:
        sock.sendall(http_request("GET", "/api/log?run=ab", host=LAN, headers={"Authorization": f"Bearer {TOKEN}"}))
        resp = plain_stream(sock).read_response()
    check(resp.status == 409 and b"set [log] access = FILE" in resp.body, (resp.status, resp.body))
    d.stop()


@suite.test
def a_large_log_streams_with_the_daemons_memory_unchanged():
    if "out" not in HTTP_RUN:
        run_with_verify_fetches_the_runs_lines_and_passes()
    # 100,000 lines of other events (~30 MB) after the run's: the answer is the run's lines only.
    filler = ('{"event":"vless.reject","ts":"2026-01-01T00:00:00.000000Z","reason":"unknown_user","detail":"'
              + "x" * 240 + '"}\n') * 1000
    with open(D.access, "a") as f:
        for _ in range(100):
            f.write(filler)
    before = rss_kib(D.proc.pid)
    v = runner("verify", HTTP_RUN["out"], "--daemon", DAEMON, "--token", TOKEN)
    after = rss_kib(D.proc.pid)
    check(v.returncode == 0 and "verify: OK" in v.stdout, v.stdout + v.stderr)
    end = json.loads((HTTP_RUN["out"] / "daemon-log.jsonl").read_text().splitlines()[-1])
    check(end["scanned_bytes"] > 30_000_000 and end["lines"] > 100_000 and end["selected"] == HTTP_RUN["lines"], end)
    # Read in 64 KiB steps, sent as selected: the whole file never sits in the daemon's memory.
    check(after - before < 8 * 1024, f"RSS {before} -> {after} KiB while streaming a 30 MB log")


@suite.test
def an_answer_without_its_end_line_is_refused_as_cut_short():
    """A stand-in admin listener that sends a 200 and lines but closes before log.end."""
    v, _ = verify_against_stand_in(
        lambda conn: conn.sendall(OK_HEAD + (D.access.read_text().splitlines()[0] + "\n").encode()))
    check(v.returncode == 1 and "ended its answer without a log.end line: the answer is cut short" in v.stderr,
          v.stdout + v.stderr)


def stand_in_admin(answer) -> tuple[int, threading.Thread, socket.socket]:
    """A one-connection admin listener on LAN: reads the request head, then calls answer(conn)."""
    lsock = socket.socket()
    lsock.bind((LAN, 0))
    lsock.listen(1)
    lsock.settimeout(30)

    def serve():
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
            try:
                answer(conn)
            except OSError:
                pass  # the runner stopped reading and closed: what the tests want

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return lsock.getsockname()[1], t, lsock


def verify_against_stand_in(answer, *extra, timeout: float = 60):
    if "out" not in HTTP_RUN:
        run_with_verify_fetches_the_runs_lines_and_passes()
    port, t, lsock = stand_in_admin(answer)
    start = time.monotonic()
    try:
        v = runner("verify", HTTP_RUN["out"], "--daemon", f"http://{LAN}:{port}", *extra, timeout=timeout)
    finally:
        t.join(timeout=30)
        lsock.close()
    return v, time.monotonic() - start


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"


@suite.test
def an_endless_line_is_refused_at_the_line_cap():
    """A hostile admin sends one line that never ends: the runner stops at 1 MiB with the reason."""
    sent = [0]

    def answer(conn):
        conn.sendall(OK_HEAD)
        block = b"x" * 65536
        while sent[0] < 64 << 20:  # far past the cap; the runner must close long before
            conn.sendall(block)
            sent[0] += len(block)

    v, _ = verify_against_stand_in(answer)
    check(v.returncode == 1 and "sent a line over 1048576 bytes" in v.stderr, v.stdout + v.stderr)
    check(sent[0] < 16 << 20, f"the stand-in sent {sent[0]} bytes before the runner stopped reading")


@suite.test
def a_drip_fed_answer_ends_at_the_fetch_timeout():
    """A newline a second (each read in time) would keep a verify waiting forever: --fetch-timeout ends it."""
    def answer(conn):
        conn.sendall(OK_HEAD)
        for _ in range(40):
            conn.sendall(b"\n")
            time.sleep(0.5)

    v, took = verify_against_stand_in(answer, "--fetch-timeout", 3)
    check(v.returncode == 1 and "no whole answer within 3 s (--fetch-timeout)" in v.stderr, v.stdout + v.stderr)
    check(took < 10, f"verify took {took:.1f} s")


@suite.test
def a_head_and_16_kib_of_lines_in_one_read_pass():
    """An honest answer: the head, the run's lines after 20 KiB of other lines, log.end, in one write."""
    if "out" not in HTTP_RUN:
        run_with_verify_fetches_the_runs_lines_and_passes()
    rid = run_id(HTTP_RUN["out"])
    lines = [line for line in D.access.read_text().splitlines() if f'"run":"{rid}"' in line]
    filler = '{"event":"vless.reject","ts":"2026-01-01T00:00:00.000000Z","reason":"unknown_user"}\n' * 260
    body = filler + "".join(line + "\n" for line in lines)
    end = json.dumps({"event": "log.end", "file": str(D.access), "scanned_bytes": len(body), "lines": 260 + len(lines),
                      "selected": 260 + len(lines), "complete": True})
    payload = OK_HEAD + (body + end + "\n").encode()
    check(len(filler) > 16384 and len(payload) < 65536, len(payload))

    v, _ = verify_against_stand_in(lambda conn: conn.sendall(payload))
    check(v.returncode == 0 and "verify: OK" in v.stdout, v.stdout + v.stderr)


suite.run()
