"""The runner `vlessbench` against the real daemon and v2ray: files, routes, verify, the stall."""
import csv
import json
import re
import socket
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

from harness import (CLIENT_BIN, BIN, LOOPBACK, Daemon, Suite, V2ray, check, free_port, make_cert, require_binary, spawn,
                     stop_process, tempdir, v2ray_client_config, v2ray_server_config, v2ray_socks_inbound, wait_ports)

suite = Suite("test_runner")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
D = Daemon()
TARGET = f"http://{LOOPBACK}:{D.target_port}/"


def link(listener: str, extra: str = "") -> str:
    return (f"vless://{D.uuid}@{LOOPBACK}:{D.port(listener)}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp{extra}#{listener}")


def runner(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def run_paths(paths, *extra, new=8, reuse=12, warmup=2):
    out = tempdir("vlessbench-run-")
    argv = ["run", "--target", TARGET, "--new", new, "--reuse", reuse, "--warmup", warmup, "--out", out,
            "--seed", 7, *extra]
    for p in paths:
        argv += ["--path", p]
    return runner(*argv), out


def rows(out):
    with open(out / "samples.csv", newline="") as f:
        return list(csv.DictReader(f))


def client_with_socks(http_port: int, socks_port: int, server_port: int, user_uuid: str) -> dict:
    cfg = v2ray_client_config(http_port, server_port, user_uuid)
    cfg["inbounds"].append(v2ray_socks_inbound(socks_port, udp=False))
    return cfg


@suite.test
def direct_vless_connect_socks_files_and_verify():
    http_port, socks_port = free_port(), free_port()
    with V2ray(client_with_socks(http_port, socks_port, D.port("kernel"), D.uuid), http_port):
        r, out = run_paths([f"vl={link('kernel')}", f"v2http=http://{LOOPBACK}:{http_port}",
                            f"v2socks=socks5://{LOOPBACK}:{socks_port}"])
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    for name in ("samples.csv", "summary.json", "report.svg"):
        check((out / name).stat().st_size > 0, f"{name} missing")
    samples = rows(out)
    check(len(samples) == 4 * (8 + 12), len(samples))  # direct added as the baseline
    check(all(s["ok"] == "1" for s in samples), [s for s in samples if s["ok"] != "1"][:3])
    for s in samples:
        want = "direct" if s["path"] == "direct" else "vless"
        check(s["route"] == want, s)
        if s["path"] != "direct" and s["mode"] == "new":
            check(s["tls_ms"] and s["vless_ms"] and s["upstream_ms"], f"no server timing: {s}")
    summary = json.loads((out / "summary.json").read_text())
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    check(list(summary["paths"]) == ["direct", "vl", "v2http", "v2socks"], list(summary["paths"]))
    vl = summary["paths"]["vl"]
    for mode in ("new", "reuse"):
        m = vl[mode]
        check(m["n"] == (8 if mode == "new" else 12), m)
        check(m["median_ci_low_ms"] <= m["median_ms"] <= m["median_ci_high_ms"], m)
        check(m["p95_ms"] >= m["median_ms"], m)
        check(m["paired_delta_median_ms"] is not None, m)
    check(summary["run"]["seed"] == 7 and "--seed 7" in summary["run"]["command_line"], summary["run"])
    svg = ET.parse(out / "report.svg").getroot()
    check(svg.tag.endswith("svg"), svg.tag)
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    check(len([p for p in lines if p.get("class") == "latency"]) == 8, "one CDF per path and mode")
    # The stall plot: one CDF of the server's VLESS header wait per path that carried server timing.
    check(len([p for p in lines if p.get("class") == "stall"]) == 3, "one stall CDF per VLESS path")
    check(any(l.get("class") == "threshold" for l in svg.iter("{http://www.w3.org/2000/svg}line")), "no 30 ms line")
    check("paired d" in r.stdout and "stall verdict" in r.stdout, r.stdout)

    v = runner("verify", out, "--log", D.access)
    check(v.returncode == 0, f"verify rc {v.returncode}\n{v.stdout}\n{v.stderr}")
    check(f"{len(samples)} samples, {len(samples)} found" in v.stdout, v.stdout)


@suite.test
def nagle_client_stalls_on_delayed_ack_only():
    nagle = "&nodelay=off&writes=split"
    r, out = run_paths([f"nagle-kernel={link('kernel', nagle)}", f"nagle-quick={link('quick', nagle)}",
                        f"nodelay-kernel={link('kernel')}"], new=12, reuse=0, warmup=2)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    p = json.loads((out / "summary.json").read_text())["paths"]
    check(p["nagle-kernel"]["stall"]["verdict"] == "stall", p["nagle-kernel"]["stall"])
    check(p["nagle-kernel"]["stall"]["vless_ms"] >= 30, p["nagle-kernel"]["stall"])
    check(p["nagle-kernel"]["new"]["median_ms"] >= 30, p["nagle-kernel"]["new"])
    for quiet in ("nagle-quick", "nodelay-kernel"):
        check(p[quiet]["stall"]["verdict"] == "none", (quiet, p[quiet]["stall"]))
        check(p[quiet]["new"]["median_ms"] < 30, (quiet, p[quiet]["new"]))
    check("STALL" in r.stdout, r.stdout)


@suite.test
def stall_on_a_quickack_listener_means_tcp_is_terminated_in_between():
    # socat in front of the QUICKACK listener terminates the client's TCP, as qemu's hostfwd or a
    # NAT port forward does (docs/methodology.md): the daemon's quick ACKs no longer reach the
    # client, whose Nagle now meets socat's delayed ACK. The daemon says in Server-Timing that the
    # listener has QUICKACK on, so the verdict can say what the stall means.
    fwd_port = free_port()
    fwd = spawn(["socat", f"TCP-LISTEN:{fwd_port},bind={LOOPBACK},reuseaddr,fork", f"TCP:{LOOPBACK}:{D.port('quick')}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ports([(LOOPBACK, fwd_port)], proc=fwd, what="socat")
        nagle = "&nodelay=off&writes=split"
        forwarded = link("quick", nagle).replace(f"{LOOPBACK}:{D.port('quick')}", f"{LOOPBACK}:{fwd_port}")
        r, out = run_paths([f"nagle-quick={link('quick', nagle)}", f"nagle-forwarded={forwarded}"],
                           new=12, reuse=0, warmup=2)
        check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        p = json.loads((out / "summary.json").read_text())["paths"]
        direct, fwd_stall = p["nagle-quick"]["stall"], p["nagle-forwarded"]["stall"]
        print(f"FIGURE stall through socat to the QUICKACK listener: {fwd_stall['stalled']}/{fwd_stall['with_timing']}, "
              f"vless phase {fwd_stall['vless_ms']} ms; direct: {direct['stalled']}/{direct['with_timing']}", flush=True)
        check(direct["verdict"] == "none" and not direct["terminated_in_between"], direct)
        check(fwd_stall["verdict"] == "stall", fwd_stall)
        check(fwd_stall["terminated_in_between"], fwd_stall)
        check("terminates TCP" in fwd_stall["text"], fwd_stall["text"])
    finally:
        stop_process(fwd)


@suite.test
def proxy_that_bypasses_the_daemon_is_a_route_mismatch():
    # v2ray client -> v2ray VLESS server -> freedom: the request reaches the target directly.
    cert, key = make_cert(tempdir())
    server_port, http_port = free_port(), free_port()
    with V2ray(v2ray_server_config(server_port, D.uuid, cert, key), server_port), \
            V2ray(v2ray_client_config(http_port, server_port, D.uuid), http_port):
        r, out = run_paths([f"bypass=http://{LOOPBACK}:{http_port}"], new=3, reuse=3, warmup=0)
        check(r.returncode == 1, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        check("ROUTE MISMATCH x6" in r.stdout, r.stdout)
        check("route mismatches" in r.stderr, r.stderr)
        allowed, _ = run_paths([f"bypass=http://{LOOPBACK}:{http_port}"], "--allow-mismatch",
                               new=3, reuse=3, warmup=0)
        check(allowed.returncode == 0, allowed.stderr)
    summary = json.loads((out / "summary.json").read_text())
    check(summary["paths"]["bypass"]["route_mismatches"] == 6, summary["paths"]["bypass"])
    v = runner("verify", out, "--log", D.access)
    check(v.returncode == 1 and "route mismatches (log route vs path kind): 6" in v.stdout, v.stdout)


@suite.test
def port_forward_paths_report_their_route():
    # v2ray's dokodemo-door (a client's "tunnel" entry): one forwards through VLESS to the
    # daemon, one straight to the target (freedom). Both are tcp:// paths; neither is a mismatch.
    via, bypass = free_port(), free_port()
    cfg = v2ray_client_config(free_port(), D.port("kernel"), D.uuid)
    door = {"address": LOOPBACK, "port": D.target_port, "network": "tcp"}
    cfg["inbounds"] = [
        {"tag": "via", "listen": LOOPBACK, "port": via, "protocol": "dokodemo-door", "settings": door},
        {"tag": "bypass", "listen": LOOPBACK, "port": bypass, "protocol": "dokodemo-door", "settings": door},
    ]
    cfg["outbounds"][0]["tag"] = "vless"
    cfg["outbounds"].append({"tag": "freedom", "protocol": "freedom", "settings": {}})
    cfg["routing"] = {"rules": [{"type": "field", "inboundTag": ["via"], "outboundTag": "vless"},
                                {"type": "field", "inboundTag": ["bypass"], "outboundTag": "freedom"}]}
    with V2ray(cfg, via):
        r, out = run_paths([f"fwd-vless=tcp://{LOOPBACK}:{via}", f"fwd-direct=tcp://{LOOPBACK}:{bypass}"],
                           new=4, reuse=6, warmup=1)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    samples = rows(out)
    check(len(samples) == 3 * 10 and all(s["ok"] == "1" for s in samples),
          [s for s in samples if s["ok"] != "1"][:3])
    routes = {(s["path"], s["route"]) for s in samples}
    check(routes == {("direct", "direct"), ("fwd-vless", "vless"), ("fwd-direct", "direct")}, routes)
    summary = json.loads((out / "summary.json").read_text())
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    v = runner("verify", out, "--log", D.access)
    check(v.returncode == 0, f"verify rc {v.returncode}\n{v.stdout}\n{v.stderr}")


@suite.test
def failures_are_samples_with_reasons():
    refused = free_port()  # nothing listens there
    with socket.socket() as hole:  # accepts into the backlog, never answers
        hole.bind((LOOPBACK, 0))
        hole.listen(16)
        r, out = run_paths([f"refused=http://{LOOPBACK}:{refused}",
                            f"silent=socks5://{LOOPBACK}:{hole.getsockname()[1]}"],
                           "--timeout", "0.3", new=2, reuse=2, warmup=0)
    # direct worked, but two paths had no successful sample: exit 3, each named with its last error.
    check(r.returncode == 3, f"rc {r.returncode}\n{r.stderr}")
    check("path refused: 4/4 samples failed" in r.stderr and "path silent: 4/4 samples failed" in r.stderr, r.stderr)
    samples = rows(out)
    check(len(samples) == 12, len(samples))
    by_path = {}
    for s in samples:
        by_path.setdefault(s["path"], []).append(s)
    check(all(s["ok"] == "1" for s in by_path["direct"]), by_path["direct"])
    check(all(s["ok"] == "0" and "Connection refused" in s["error"] for s in by_path["refused"]),
          by_path["refused"])
    check(all(s["ok"] == "0" and "timeout after 300 ms" in s["error"] for s in by_path["silent"]),
          by_path["silent"])
    check("failures:" in r.stdout and "x connect: Connection refused" in r.stdout, r.stdout)


@suite.test
def non_2xx_is_a_failure_and_all_failed_exits_1():
    out = tempdir("vlessbench-run-")
    r = runner("run", "--target", f"http://{LOOPBACK}:{D.target_port}/no-such-page", "--new", 2,
               "--reuse", 2, "--warmup", 0, "--out", out)
    check(r.returncode == 1, f"rc {r.returncode}\n{r.stderr}")
    check("every sample failed" in r.stderr, r.stderr)
    check(all(s["status"] == "404" and s["error"] == "status 404" for s in rows(out)), rows(out))


@suite.test
def usage_errors_exit_2():
    for argv in (["run", "--path", "nonsense"], ["run", "--path", "x=ftp://h:1"], ["run", "--new", "-1"],
                 ["run", "--target", "ftp://127.0.0.1/"], ["run", "--target", "banner://127.0.0.1"],
                 ["run", "--bulk", "lots"], ["run", "--target", "banner://127.0.0.1:1", "--bulk", "1M"], ["bogus"], []):
        r = runner(*argv)
        check(r.returncode == 2, f"{argv}: rc {r.returncode} {r.stderr}")


@suite.test
def compare_shows_runs_side_by_side():
    _, a = run_paths([f"vl={link('kernel')}"], new=3, reuse=3, warmup=0)
    _, b = run_paths([f"vl={link('quick')}"], new=3, reuse=3, warmup=0)
    r = runner("compare", a, b)
    check(r.returncode == 0, r.stderr)
    check(f"[1] {a}" in r.stdout and f"[2] {b}" in r.stdout and "new median" in r.stdout, r.stdout)


def stand_in_target(answer, connections: int = 4):
    """A loopback HTTP target of the test's own: for each connection, reads a request head, then
    answer(conn). Returns (url, stop)."""
    lsock = socket.socket()
    lsock.bind((LOOPBACK, 0))
    lsock.listen(connections)
    lsock.settimeout(30)

    def serve():
        for _ in range(connections):
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                buf = b""
                try:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        buf += chunk
                    answer(conn)
                except OSError:
                    pass  # the runner gave up on the sample and closed

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    def stop():
        lsock.close()
        t.join(timeout=30)

    return f"http://{LOOPBACK}:{lsock.getsockname()[1]}/", stop


@suite.test
def a_dripped_body_ends_at_the_timeout():
    """--timeout bounds the body, not each read: 8 bytes at one per 1.5 s under --timeout 2 fail the sample."""
    def answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Vlessbench-Route: direct\r\n\r\n")
        for _ in range(8):
            time.sleep(1.5)
            conn.sendall(b"x")

    url, stop = stand_in_target(answer, connections=1)
    out = tempdir("vlessbench-run-")
    start = time.monotonic()
    try:
        r = runner("run", "--target", url, "--new", 1, "--reuse", 0, "--warmup", 0, "--timeout", 2, "--out", out)
    finally:
        stop()
    took = time.monotonic() - start
    samples = rows(out)
    check(len(samples) == 1 and samples[0]["ok"] == "0"
          and samples[0]["error"] == "response body: timeout after 2000 ms", samples)
    check(took < 8, f"the run took {took:.1f} s")


@suite.test
def a_nan_or_negative_server_timing_fails_the_sample_with_the_reason():
    """A target whose Server-Timing says nan, inf or -1e29 ms: those samples fail, nothing prints nan."""
    timings = iter([b"tls;dur=0.5, vless;dur=nan", b"tls;dur=inf, vless;dur=0.1", b"tls;dur=0.5, vless;dur=-1e29",
                    b"tls;dur=0.5, vless;dur=0.1"])

    def answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n"
                     b"X-Vlessbench-Route: vless session=1 user=a\r\nServer-Timing: " + next(timings) + b"\r\n\r\n")

    url, stop = stand_in_target(answer, connections=4)
    out = tempdir("vlessbench-run-")
    try:
        r = runner("run", "--target", url, "--new", 4, "--reuse", 0, "--warmup", 0, "--timeout", 5, "--out", out)
    finally:
        stop()
    errors = [s["error"] for s in rows(out)]
    check(errors == ["Server-Timing: vless;dur=nan is not a finite duration >= 0",
                     "Server-Timing: tls;dur=inf is not a finite duration >= 0",
                     "Server-Timing: vless;dur=-1e29 is not a finite duration >= 0", ""], errors)
    printed = r.stdout + r.stderr + (out / "samples.csv").read_text() + (out / "summary.json").read_text()
    check(not re.findall(r"(?<!dur=)\b(nan|-?inf)\b", printed, re.I), printed[-3000:])


suite.run()
