"""A new user's first hour (issue 44; the demo's part: test_demo.py): `--check` naming every missing folder at once, `reload` that signals only a
vlessbenchd (by --pid or the daemon's --pid-file), runner messages that say what the daemon said
(connect_failed for a target that is down, unknown_user for a wrong UUID, at once), usage errors
that exit 2 and name the word typed, a port-in-use hint, a plain word for an unclosed TOML string,
v2ray's refusal in one line, and the index page's `links` hint that works as written."""
import os
import re
import socket
import subprocess
import time
import tomllib
from pathlib import Path

from harness import (CLIENT_BIN, DAEMON, LOOPBACK, REPO, ANY_PORT, Daemon, Skip, Suite, check, free_port, new_uuid,
                     require_binary, run_daemon, spawn, stop_process, tempdir)
from harness import peers

suite = Suite("test_first_hour")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
WRONG_UUID = "11111111-1111-4111-8111-111111111111"


def runner(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def link(d: Daemon, listener: str = "kernel", user: str = "") -> str:
    return (f"vless://{user or d.uuid}@{LOOPBACK}:{d.port(listener)}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#{listener}")


def shipped_with_missing_folders() -> tuple[Path, Path, Path]:
    """The shipped config with a real UUID, its /var/log and /var/lib paths as a checkout meets them:
    folders that do not exist (moved under a temp folder when this machine has the real ones)."""
    text = (REPO / "config" / "vlessbenchd.toml").read_text().replace("00000000-0000-4000-8000-000000000000",
                                                                        new_uuid())
    root = tempdir()
    log_dir, state_dir = Path("/var/log/vlessbench"), Path("/var/lib/vlessbench")
    if log_dir.exists() or state_dir.exists():
        text = text.replace("/var/log/vlessbench", str(root / "log")).replace("/var/lib/vlessbench",
                                                                              str(root / "lib"))
        log_dir, state_dir = root / "log", root / "lib"
    cfg = tomllib.loads(text)
    check(Path(cfg["log"]["access"]).parent == log_dir and Path(cfg["tls"]["cert"]).parent == state_dir, cfg)
    path = root / "vlessbenchd.toml"
    path.write_text(text)
    return path, log_dir, state_dir


@suite.test
def check_names_every_missing_folder_at_once():
    # On main: --check named the certificate's folder; once made, start failed on the access log's
    # folder ("access log ...: No such file or directory") with no hint: three tries.
    path, log_dir, state_dir = shipped_with_missing_folders()
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 1 and r.stdout.strip() != "ok", (r.returncode, r.stdout, r.stderr))
    check(f"the folder {state_dir} does not exist" in r.stderr and f"mkdir -p {state_dir}" in r.stderr, r.stderr)
    check(f'log.access: "{log_dir}/access.jsonl": the folder {log_dir} does not exist: create it (mkdir -p {log_dir}'
          in r.stderr, r.stderr)
    check(not log_dir.exists() and not state_dir.exists(), "a folder was made")
    # The start says the same before it opens anything.
    r = run_daemon(["--config", path], timeout=10)
    check(r.returncode == 1 and "log.access" in r.stderr and "tls.cert" in r.stderr, (r.returncode, r.stderr))
    # With both folders made, --check says ok.
    log_dir.mkdir(parents=True)
    state_dir.mkdir(parents=True)
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr))


@suite.test
def reload_signals_only_a_vlessbenchd():
    # On main: `reload --pid` of an Xray client printed ok and its SIGHUP killed Xray; a dead pid
    # printed "ok" before the error.
    d = Daemon(start=False)
    other = spawn(["sleep", "30"])
    try:
        r = run_daemon(["reload", "--config", d.config_path, "--pid", other.pid])
        check(r.returncode == 1 and f'--pid {other.pid} is "sleep", not a vlessbenchd: no signal sent' in r.stderr,
              (r.returncode, r.stdout, r.stderr))
        check(r.stdout == "", r.stdout)
        time.sleep(0.2)
        check(other.poll() is None, f"the process got a signal: {other.returncode}")
    finally:
        stop_process(other)
    gone = subprocess.Popen(["true"])
    gone.wait()
    r = run_daemon(["reload", "--config", d.config_path, "--pid", gone.pid])
    check(r.returncode == 1 and "no such process" in r.stderr and "ok" not in r.stdout,
          (r.returncode, r.stdout, r.stderr))


@suite.test
def reload_by_the_daemons_pid_file():
    # Without systemd there is no $MAINPID: the daemon's --pid-file holds its process id.
    pid_file = tempdir() / "vlessbenchd.pid"
    d = Daemon(extra_args=["--pid-file", pid_file])
    check(pid_file.read_text().strip() == str(d.proc.pid), pid_file.read_text())
    r = run_daemon(["reload", "--config", d.config_path, "--pid-file", pid_file])
    check(r.returncode == 0 and r.stdout.startswith(f"ok: vlessbenchd {d.proc.pid} reloads"), (r.returncode, r.stdout,
                                                                                             r.stderr))
    check(d.wait_event("config.reload", timeout=10, ok=True), "no reload logged")
    check(d.stop() == 0, "the daemon did not stop cleanly")
    check(not pid_file.exists(), "the pid file outlived the daemon")
    r = run_daemon(["reload", "--config", d.config_path, "--pid-file", pid_file])
    check(r.returncode == 1 and "is the daemon running?" in r.stderr, (r.returncode, r.stderr))


@suite.test
def a_down_target_is_connect_failed_not_a_wrong_uuid():
    # On main: "the daemon closed the connection right after the VLESS header: usually a wrong UUID"
    # while the daemon logged connect_failed: Connection refused.
    d = Daemon()
    out = tempdir()
    r = runner("run", "--target", f"http://{LOOPBACK}:{free_port()}/", "--path", f"v={link(d)}", "--new", 2,
               "--reuse", 0, "--warmup", 0, "--out", out)
    check(r.returncode == 1 and "path v: 2/2 samples failed" in r.stderr, (r.returncode, r.stderr))
    check("the direct path failed too (connect: Connection refused)" in r.stderr and "connect_failed" in r.stderr,
          r.stderr)
    check("UUID" not in r.stderr, r.stderr)
    check(d.wait_event("vless.reject", timeout=5, reason="connect_failed"), "the daemon logged no connect_failed")


@suite.test
def clients_with_a_wrong_uuid_fail_at_once_naming_unknown_user():
    # On main: each core's readiness wait ran out (20 s), then "no core could be started".
    peers.require("v2ray")
    d = Daemon()
    t0 = time.monotonic()
    r = runner("clients", "--link", link(d, user=WRONG_UUID), "--cores", "v2ray", "--out", tempdir(),
               "--target", f"http://{LOOPBACK}:{d.target_port}/", "--new", 2, "--reuse", 2, "--warmup", 0)
    took = time.monotonic() - t0
    check(r.returncode == 1, (r.returncode, r.stderr))
    check("unknown_user" in r.stderr and "no core was started" in r.stderr, r.stderr)
    check("no core could be started" not in r.stderr, r.stderr)
    check(took < 5, f"took {took:.1f} s")
    check(d.wait_event("vless.reject", timeout=5, reason="unknown_user"), "no unknown_user logged")


@suite.test
def v2rays_refusal_of_a_transport_is_one_line():
    # On main: "refused its config ... left out" and then v2ray's own four lines.
    peers.require("v2ray")
    cfg = {"users": [{"name": "u", "uuid": new_uuid()}],
           "vless": [{"name": "up", "listen": f"{LOOPBACK}:{free_port()}", "transport": "httpupgrade", "path": "/up"}],
           "target": [{"name": "http", "listen": ANY_PORT}]}
    d = Daemon(cfg)
    up = peers.share_links(peers.links_text(d))
    node = next(v for k, v in up.items() if k.startswith("up"))
    r = runner("clients", "--link", node, "--cores", "v2ray", "--out", tempdir(),
               "--target", f"http://{LOOPBACK}:{d.target_port}/", "--new", 1, "--reuse", 0, "--warmup", 0)
    lines = r.stderr.splitlines()
    refusal = [i for i, line in enumerate(lines) if "v2ray refused its config" in line]
    check(len(refusal) == 1, r.stderr)
    check(re.search(r"v2ray refused its config for \S+: it has no transport httpupgrade: left out \(.*check\.log\)$",
                    lines[refusal[0]]), lines[refusal[0]])
    check(refusal[0] + 1 == len(lines) or not lines[refusal[0] + 1].startswith("  "), r.stderr)


@suite.test
def usage_errors_exit_2_and_name_what_was_typed():
    # On main: vlessbenchd's CLI11 codes 106/109; "A subcommand is required" for `rn`; "not expected:
    # 10 --nwe"; --cores foo silently ignored; run --help without udp:// and dns://.
    for args, want in ((["--bogus"], "--bogus"), (["links"], "--config FILE is required"),
                       (["reload", "--config", "x.toml"], "--pid PID or --pid-file FILE")):
        r = run_daemon(args)
        check(r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr))
    r = run_daemon(["--help"])
    check(r.returncode == 0 and "Exit codes: 0" in r.stdout and "2 usage error" in r.stdout, r.stdout)
    r = runner("rn")
    check(r.returncode == 2 and "unknown command 'rn' (did you mean run?)" in r.stderr, r.stderr)
    r = runner("run", "--nwe", 10)
    check(r.returncode == 2 and "vlessbench run: unknown option --nwe (did you mean --new?)" in r.stderr, r.stderr)
    r = runner("clients", "--cores", "foo", "--link", "vless://x")
    check(r.returncode == 2 and "foo" in r.stderr, r.stderr)
    r = runner("run", "--help")
    check("udp://H:P" in r.stdout and "dns://H:P/NAME" in r.stdout, r.stdout)
    r = runner("run", "--target", f"http://{LOOPBACK}:{free_port()}/", "--new", 1, "--reuse", 0, "--warmup", 0,
               "--out", tempdir())
    check("no --path given: measuring direct alone" in r.stderr, r.stderr)


@suite.test
def a_port_in_use_hints_at_another_vlessbenchd():
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        cfg = {"users": [{"name": "u", "uuid": new_uuid()}],
               "target": [{"name": "http", "listen": f"{LOOPBACK}:{busy.getsockname()[1]}"}]}
        d = Daemon(cfg, start=False)
        r = run_daemon(["--config", d.config_path], timeout=10)
    check(r.returncode == 1 and "Address already in use" in r.stderr, (r.returncode, r.stderr))
    check("is another vlessbenchd running" in r.stderr and "ss -ltnup" in r.stderr, r.stderr)


@suite.test
def an_unclosed_string_is_said_plainly():
    # On main: toml++'s "unescaped control characters other than TAB (U+0009) are explicitly prohibited".
    path = tempdir() / "broken.toml"
    path.write_text('[log]\nlevel = "info\n')
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 1 and re.search(r"broken\.toml:2: .*a string is not closed on its line", r.stderr), r.stderr)
    check("control characters" not in r.stderr, r.stderr)
    path.write_text('[log]\nlevel = "info')
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 1 and "closing quote is missing before the end of the file" in r.stderr, r.stderr)


@suite.test
def the_index_pages_links_hint_works_as_written():
    # On main the page said `vlessbenchd links --host ADDRESS`, which fails: --config is required.
    cfg = {"users": [{"name": "u", "uuid": new_uuid()}],
           "vless": [{"name": "kernel", "listen": ANY_PORT}],
           "target": [{"name": "http", "listen": ANY_PORT, "index_links": False}]}
    d = Daemon(cfg)
    with socket.create_connection((LOOPBACK, d.target_port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nAccept: text/html\r\nConnection: close\r\n\r\n")
        page = b""
        while chunk := s.recv(65536):
            page += chunk
    text = page.decode(errors="replace")
    check("vlessbenchd links --config FILE --host ADDRESS" in text, text[-800:])
    hint = re.search(r"<code>(vlessbenchd links [^<]*)</code>", text).group(1)
    r = run_daemon([*hint.replace("vlessbenchd ", "").replace("FILE", str(d.config_path))
                    .replace("ADDRESS", LOOPBACK).split(), "--no-qr", "--ports-file", d.ports_path])
    check(r.returncode == 0 and "vless://" in r.stdout, (r.returncode, r.stderr))


suite.run()
