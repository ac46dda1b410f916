"""The runner's https://, banner:// and --bulk runs against the real daemon, through the built-in
VLESS client and the real v2ray 4.34 client's HTTP entry (issue 17): every sample's route, the
inner TLS phase, time to first banner byte, throughput, and `vlessbench verify` on each run.
"""
import csv
import json
import subprocess

from harness import (ANY_PORT, CLIENT_BIN, BIN, LOOPBACK, Daemon, Suite, V2ray, check, free_port, require_binary, tempdir,
                     v2ray_client_config, verify_log)

suite = Suite("test_runner_targets")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
UUID = "7a2b0c4e-1b2c-4d3e-8f00-112233445566"
D = Daemon({
    "users": [{"name": "tester", "uuid": UUID}],
    "vless": [{"name": "kernel", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT},
               {"name": "https", "listen": ANY_PORT, "tls": True}],
    "banner": [{"name": "banner", "listen": ANY_PORT}],
})
LINK = (f"vless://{UUID}@{LOOPBACK}:{D.port('kernel')}?encryption=none&security=tls&sni=localhost"
        f"&allowInsecure=1&type=tcp#kernel")
HTTP_PORT = free_port()
V2 = V2ray(v2ray_client_config(HTTP_PORT, D.port("kernel"), UUID), HTTP_PORT)
PATHS = [f"vl={LINK}", f"v2ray=http://{LOOPBACK}:{HTTP_PORT}"]


def run(target, *extra, new=6, reuse=8, warmup=1):
    out = tempdir("vlessbench-run-")
    argv = [RUNNER, "run", "--target", target, "--new", new, "--reuse", reuse, "--warmup", warmup, "--out", out,
            "--seed", 11, *extra]
    for p in PATHS:
        argv += ["--path", p]
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    summary = json.loads((out / "summary.json").read_text())
    check((out / "report.svg").stat().st_size > 0)
    # banner.connection is written at close, and v2ray closes its upstream a little after the client
    # (its uplink/downlink-only timeouts): verify again until every connection is logged, bounded.
    verified = verify_log(RUNNER, D.access, out, timeout=15 if target.startswith("banner://") else 0)
    return r.stdout, rows, summary, verified


def routes_right(rows):
    check(all(s["ok"] == "1" for s in rows), [s for s in rows if s["ok"] != "1"][:3])
    for s in rows:
        want = "direct" if s["path"].startswith("direct") else "vless"
        check(s["route"] == want, s)


@suite.test
def https_inner_handshake_is_its_own_phase():
    table, rows, summary, _ = run(f"https://{LOOPBACK}:{D.port('https')}/generate_204")
    routes_right(rows)
    fresh = [s for s in rows if s["mode"] == "new"]
    check(len(fresh) == 3 * 6, len(fresh))
    for s in fresh:  # part of the sample, never more than it
        check(s["inner_tls_ms"] and 0 < float(s["inner_tls_ms"]) < float(s["ns"]) / 1e6, s)
    check(all(not s["inner_tls_ms"] for s in rows if s["mode"] == "reuse"))
    for name in ("direct", "vl", "v2ray"):
        check(summary["paths"][name]["new"]["inner_tls_median_ms"] > 0, summary["paths"][name])
    check("inner TLS handshake with the target" in table, table)


@suite.test
def banner_time_to_first_byte_and_echo():
    table, rows, summary, verify = run(f"banner://{LOOPBACK}:{D.port('banner')}")
    routes_right(rows)
    vl = [float(s["ns"]) / 1e6 for s in rows if s["path"] == "vl" and s["mode"] == "new"]
    v2 = [float(s["ns"]) / 1e6 for s in rows if s["path"] == "v2ray" and s["mode"] == "new"]
    check(len(vl) == 6 and len(v2) == 6)
    # Sessions named by the banners are distinct for new connections.
    sessions = [s["session"] for s in rows if s["path"] == "vl" and s["mode"] == "new"]
    check(len(set(sessions)) == len(sessions), sessions)
    check("banner.connection lines in the log" in verify, verify)
    print(f"banner TTFB median: built-in {sorted(vl)[3]:.2f} ms, v2ray {sorted(v2)[3]:.2f} ms", flush=True)


@suite.test
def bulk_download_and_upload_per_path():
    size = 16 << 20
    table, rows, summary, verify = run(f"http://{LOOPBACK}:{D.port('http')}/", "--bulk", "16M", new=2, reuse=3)
    routes_right(rows)
    names = {s["path"] for s in rows}
    check(names == {f"{p}/{d}" for p in ("direct", "vl", "v2ray") for d in ("down", "up")}, names)
    check(all(int(s["bytes"]) == size and float(s["mbps"]) > 0 for s in rows), rows[:2])
    check(summary["run"]["bulk_bytes"] == size)
    for name, p in summary["paths"].items():
        for mode in ("new", "reuse"):
            t = p[mode]["throughput_mbps"]
            check(t["p5"] <= t["median"] <= t["p95"], (name, mode, t))
    check(summary["paths"]["direct/up"]["baseline"] and summary["paths"]["direct/down"]["baseline"])
    # The server's view: each request body or response fully moved, per the access log.
    ups = D.events("http.request", path="/sink")
    check(any(e.get("bytes_in") == size for e in ups), ups[-1:])
    check("client" in verify and "server" in verify, verify)
    print(table.split("throughput")[1].split("stall verdict")[0], flush=True)


@suite.test
def tls_path_through_a_tls_terminator():
    # tls://H:P (issue 26): TCP, TLS handshake, then HTTP as if direct. The daemon's https target
    # stands in for a bare terminator (bench/run.py uses HAProxy): the GET for the http target
    # goes inside that TLS session, so every sample arrives there, over TLS, answered directly.
    out = tempdir("vlessbench-run-")
    argv = [RUNNER, "run", "--target", f"http://{LOOPBACK}:{D.port('http')}/generate_204", "--new", 5,
            "--reuse", 5, "--warmup", 0, "--out", out, "--path", f"floor=tls://{LOOPBACK}:{D.port('https')}",
            "--path", f"plain=tls://{LOOPBACK}:{D.port('http')}", "--max-failed", 100]
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    floor = [s for s in rows if s["path"] == "floor"]
    check(len(floor) == 10 and all(s["ok"] == "1" and s["status"] == "204" and s["route"] == "direct"
                                   for s in floor), floor[:3])
    summary = json.loads((out / "summary.json").read_text())
    check(summary["paths"]["floor"]["kind"] == "tls", summary["paths"]["floor"])
    # The daemon's log: each floor sample's request came in on the https target (over TLS).
    seqs = {e.get("seq") for e in D.events("http.request", listener="https") if e.get("path_label") == "floor"}
    check(len(seqs) >= 10, seqs)
    # A port that speaks no TLS fails every sample with the TLS library's reason, never hangs.
    plain = [s for s in rows if s["path"] == "plain"]
    check(plain and all(s["ok"] == "0" and s["error"] for s in plain), plain[:2])
    check(r.returncode == 3 and "plain" in r.stderr, f"rc {r.returncode}\n{r.stderr}")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        V2.stop()
