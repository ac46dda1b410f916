#!/usr/bin/env python3
"""What REALITY costs a new connection (issue 40 items 5 and 7), on loopback.

Phase `clients` (item 5): one vlessbenchd with a raw-TLS listener `tls` and a REALITY listener
`reality` (same user, its own HTTPS target as the fallback), and `vlessbench clients` with the
nodes tls-tester (VLESS+TLS), tls-tester-vision and reality-tester-vision through every core found
(Xray, mihomo; sing-box 1.11.11 is left out for REALITY by its own checker: no uTLS), all paths
interleaved at random in one run. Prints per core the paired median added latency vs direct, new
connection and reused, and what REALITY+Vision adds over TLS+Vision and over plain TLS.

Phase `servers` (item 7): our REALITY+Vision listener against Xray 25.9.11's REALITY+Vision
inbound, same key, short id and server name, each with its own Xray 25.9.11 client (HTTP entry ->
the outbound `vlessbenchd links` prints, the port changed for Xray's server), both relaying to one
target-only vlessbenchd (so the servers' CPU is theirs alone):
  1. new-connection / reused added latency: one `vlessbench run`, the two paths interleaved;
  2. handshakes/s: vlessbench_load handshakes through each client's HTTP entry (CONNECT, then
     GET /generate_204; each CONNECT is a new REALITY handshake from the client), W workers for
     T s, rounds alternating ours / Xray's, with the servers' CPU per handshake.
The load average before and after is printed: the figures are loopback figures on whatever else
the machine runs.

Usage: bench/reality_latency.py [--bin BUILD/bin] [--only clients,servers] [--new 100] [--reuse 200]
       [--warmup 10] [--rounds 3] [--seconds 5] [--workers 8] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NAME = "reality.vlessbench.test"
# A fixed key pair (`xray x25519`), shared by both servers so one client entry fits both.
PRIVATE_KEY = "cKLuCXsNtU6XegVkSNZL_3Sygv78PndIC_i5kdOycEA"


def fmt(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def load_text(before, after) -> str:
    return (f"load average (1/5/15 min) before {before[0]:.2f}/{before[1]:.2f}/{before[2]:.2f}, "
            f"after {after[0]:.2f}/{after[1]:.2f}/{after[2]:.2f}")


def clients_phase(h, peers, args, out: Path) -> None:
    port = h.free_port
    d = h.Daemon({
        "users": [{"name": "tester", "uuid": h.new_uuid()}],
        "vless": [{"name": "tls", "listen": f"{h.LOOPBACK}:{port()}"},
                  {"name": "reality", "listen": f"{h.LOOPBACK}:{port()}", "security": "reality",
                   "private_key": PRIVATE_KEY, "server_names": [NAME]}],
        "target": [{"name": "http", "listen": f"{h.LOOPBACK}:{port()}"},
                   {"name": "https", "listen": f"{h.LOOPBACK}:{port()}", "tls": True}],
    })
    link_of = peers.share_links(peers.links_text(d))
    nodes = ["tls-tester", "tls-tester-vision", "reality-tester-vision"]
    cores = [c for c in ("xray", "mihomo", "sing-box") if peers.find(c)]
    argv = [str(h.CLIENT_BIN / "vlessbench"), "clients", "--no-builtin", "--out", str(out / "clients"),
            "--target", f"http://{h.LOOPBACK}:{d.target_port}/generate_204", "--new", str(args.new),
            "--reuse", str(args.reuse), "--warmup", str(args.warmup), "--seed", "40"]
    for n in nodes:
        argv += ["--link", link_of[n]]
    for c in cores:
        argv += ["--core", f"{c}={peers.find(c)}"]
    print("$", " ".join(argv if len(" ".join(argv)) < 400 else argv[:12] + ["..."]), flush=True)
    before = os.getloadavg()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    after = os.getloadavg()
    print(r.stdout, flush=True)
    print("\n".join(line for line in r.stderr.splitlines() if "left out" in line or "refused" in line), flush=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        raise SystemExit(1)
    paths = json.loads((out / "clients" / "summary.json").read_text())["paths"]
    listing = json.loads((out / "clients" / "cores" / "cores.json").read_text())
    version = {c["core"]: c["version"] for c in listing}
    d.stop()
    print("\n| core | node | new: added (paired median, ms) | reused: added (ms) | new median (ms) |")
    print("|---|---|---|---|---|")
    for core in cores:
        for n in nodes:
            p = paths.get(f"{core}-{n}")
            if p:
                print(f"| {core} | {n} | {fmt(p['new']['paired_delta_median_ms'])} | "
                      f"{fmt(p['reuse']['paired_delta_median_ms'])} | {fmt(p['new']['median_ms'])} |")
    print("\n| core (version) | REALITY+Vision minus TLS+Vision, new (ms) | REALITY+Vision minus plain TLS, new (ms) |")
    print("|---|---|---|")
    for core in cores:
        got = {n: paths.get(f"{core}-{n}", {}).get("new", {}).get("paired_delta_median_ms") for n in nodes}
        if got["reality-tester-vision"] is None:
            continue
        rv = got["reality-tester-vision"]
        sub = lambda a: None if a is None else rv - a  # noqa: E731
        print(f"| {core} ({version.get(core, '?')}) | {fmt(sub(got['tls-tester-vision']))} | "
              f"{fmt(sub(got['tls-tester']))} |")
    print("\n" + load_text(before, after), flush=True)


def xray_reality_server(uuid: str, port: int, fallback: int) -> dict:
    """Xray as a VLESS + REALITY + Vision server: the same key, server name and short id as ours,
    refused hellos to the target daemon's HTTPS listener, freedom outbound."""
    reality = {"show": False, "target": f"{'127.0.0.1'}:{fallback}", "serverNames": [NAME],
               "privateKey": PRIVATE_KEY, "shortIds": [""]}
    return {"log": {"loglevel": "warning"},
            "inbounds": [{"listen": "127.0.0.1", "port": port, "protocol": "vless",
                          "settings": {"clients": [{"id": uuid, "flow": "xtls-rprx-vision"}], "decryption": "none"},
                          "streamSettings": {"network": "raw", "security": "reality", "realitySettings": reality}}],
            "outbounds": [{"protocol": "freedom", "settings": {}}]}


def xray_client(outbound: dict, entry: int) -> str:
    return json.dumps({"log": {"loglevel": "warning"},
                       "inbounds": [{"listen": "127.0.0.1", "port": entry, "protocol": "http", "settings": {}}],
                       "outbounds": [outbound]})


def handshakes(h, load: Path, which: str, entry: int, target: int, workers: int, seconds: float, pid: int) -> dict:
    c0 = h.cpu_seconds(pid)
    rc, j = h.load_json(load, "handshakes", "--http-proxy", f"127.0.0.1:{entry}", "--target", f"127.0.0.1:{target}",
                        "--workers", workers, "--seconds", seconds, timeout=seconds + 60)
    j["server_cpu_us"] = (h.cpu_seconds(pid) - c0) * 1e6 / max(j.get("ok", 0), 1)
    if rc != 0 or j.get("failed"):
        print(f"  warning: {which}: {j.get('failed')} of {j.get('ok', 0) + j.get('failed', 0)} failed "
              f"({j.get('error')})", file=sys.stderr)
    return j


def servers_phase(h, peers, args, out: Path) -> None:
    port = h.free_port
    uuid = h.new_uuid()
    targets = h.Daemon({"users": [{"name": "tester", "uuid": uuid}],
                        "target": [{"name": "http", "listen": f"{h.LOOPBACK}:{port()}"},
                                   {"name": "https", "listen": f"{h.LOOPBACK}:{port()}", "tls": True}]})
    https = targets.port("https")
    # Xray's client closes its server connections a while after the CONNECT's end: at ~200
    # handshakes/s more than the default 256 sessions from 127.0.0.1 are open at once, and Xray's
    # server has no such cap, so ours gets a higher one here.
    ours = h.Daemon({"users": [{"name": "tester", "uuid": uuid}],
                     "vless": [{"name": "reality", "listen": f"{h.LOOPBACK}:{port()}", "security": "reality",
                                "private_key": PRIVATE_KEY, "server_names": [NAME],
                                "target": f"{h.LOOPBACK}:{https}"}]},
                    limits={"max_sessions_per_client": 8192})
    outbound = peers.links_json(peers.links_text(ours), "reality-tester-vision", "Xray (outbounds):")
    xray_port = peers.inbound_port()
    xray = peers.Core("xray", xray_reality_server(uuid, xray_port, https), [xray_port])
    entries = {}
    clients = []
    for which, server_port in (("ours", ours.port("reality")), ("xray", xray_port)):
        o = json.loads(json.dumps(outbound))
        o["settings"]["vnext"][0]["port"] = server_port
        entries[which] = peers.inbound_port()
        clients.append(peers.Core("xray", xray_client(o, entries[which]), [entries[which]]))
        peers.ready_through("xray", entries[which], targets.target_port)
    version = subprocess.run([str(peers.find("xray")), "version"], capture_output=True, text=True,
                             timeout=10).stdout.splitlines()[0]
    before = os.getloadavg()
    argv = [str(h.CLIENT_BIN / "vlessbench"), "run", "--target",
            f"http://{h.LOOPBACK}:{targets.target_port}/generate_204", "--new", str(args.new), "--reuse",
            str(args.reuse), "--warmup", str(args.warmup), "--seed", "40", "--out", str(out / "servers"),
            "--path", f"ours=http://{h.LOOPBACK}:{entries['ours']}",
            "--path", f"xray=http://{h.LOOPBACK}:{entries['xray']}",
            # The target is another daemon than ours (so the servers' CPU is theirs): it answers
            # "direct" for both, as it does for Xray's server.
            "--allow-mismatch"]
    print("$", " ".join(argv), flush=True)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    print(r.stdout, flush=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        raise SystemExit(1)
    lat = json.loads((out / "servers" / "summary.json").read_text())["paths"]
    load = h.CLIENT_BIN / "vlessbench_load"
    pids = {"ours": ours.proc.pid, "xray": xray.proc.pid}
    hs = {"ours": [], "xray": []}
    for rnd in range(args.rounds):
        for which in (("ours", "xray") if rnd % 2 == 0 else ("xray", "ours")):
            hs[which].append(handshakes(h, load, which, entries[which], targets.target_port, args.workers,
                                        args.seconds, pids[which]))
    after = os.getloadavg()
    for c in clients:
        c.stop()
    xray.stop()
    ours.stop()
    targets.stop()
    print(f"\nclient: {version} (HTTP entry), one per server; {args.workers} workers x {args.seconds} s x "
          f"{args.rounds} rounds for handshakes/s")
    print("| server | new: added (paired median, ms) | new P95 (ms) | reused: added (ms) | handshakes/s (rounds) "
          "| failed | server CPU per handshake (us) |")
    print("|---|---|---|---|---|---|---|")
    for which, label in (("ours", "vlessbenchd REALITY+Vision"), ("xray", f"Xray REALITY+Vision ({version.split(' (')[0]})")):
        p = lat[which]
        rates = [round(x["per_second"], 1) for x in hs[which]]
        cpu = statistics.median(x["server_cpu_us"] for x in hs[which])
        failed = sum(x.get("failed", 0) for x in hs[which])
        done = sum(x.get("ok", 0) for x in hs[which]) + failed
        print(f"| {label} | {fmt(p['new']['paired_delta_median_ms'])} | {fmt(p['new'].get('p95_ms'))} | "
              f"{fmt(p['reuse']['paired_delta_median_ms'])} | {statistics.median(rates):.0f} ({rates}) | "
              f"{failed}/{done} | {cpu:.0f} |")
    print("\n" + load_text(before, after), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--only", default="clients,servers")
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--reuse", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--out", default="reality-latency-out")
    args = ap.parse_args()
    os.environ["VLESSBENCH_BIN"] = str(Path(args.bin).resolve())
    sys.path.insert(0, str(REPO / "tests" / "integration"))  # the harness package, shared with the tests
    import harness as h  # noqa: E402 - reads VLESSBENCH_BIN at import
    from harness import peers  # noqa: E402

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    phases = set(args.only.split(","))
    if "clients" in phases:
        clients_phase(h, peers, args, out)
    if "servers" in phases:
        servers_phase(h, peers, args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
