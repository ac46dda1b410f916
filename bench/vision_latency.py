#!/usr/bin/env python3
"""Added latency, plain VLESS against XTLS Vision (issue 29 item 5), on loopback.

Starts a vlessbenchd with two raw-TLS listeners, `kernel` (quickack = "kernel": default delayed
ACK) and `quickack` (quickack = "on"), and an HTTP target. Per ACK policy (two batches, kept
apart as in the seed) it starts Xray, sing-box and mihomo twice each, once with the listener's
plain entry and once with its Vision entry (`vlessbenchd links`, sections NAME-tester and
NAME-tester-vision), and runs one `vlessbench run` whose paths are interleaved at random:

  builtin, builtin-vision                   the runner's own client (plain link, Vision link)
  nagle, nagle-vision                       the same, Nagle-prone (--nagle-paths: no TCP_NODELAY,
                                            header and request in two writes)
  CORE, CORE-vision                         each core's HTTP CONNECT entry (plain, Vision)

and prints the paired median added latency vs direct, new connection and reused, per path and
batch, as a markdown table (the one in docs/methodology.md), with the load average before and
after. The cores are found as the harness finds them (tests/integration/harness/cores.py); a
missing one is left out and said so. Every process it starts is stopped at exit.

Usage: bench/vision_latency.py [--bin BUILD/bin] [--new 100] [--reuse 200] [--warmup 10] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--reuse", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default="vision-latency-out")
    args = ap.parse_args()
    os.environ["VLESSBENCH_BIN"] = str(Path(args.bin).resolve())
    sys.path.insert(0, str(REPO / "tests" / "integration"))  # the harness package, shared with the tests
    import harness as h  # noqa: E402 - reads VLESSBENCH_BIN at import
    from harness import peers  # noqa: E402

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = h.free_port
    d = h.Daemon({
        "users": [{"name": "tester", "uuid": h.new_uuid()}],
        "vless": [{"name": "kernel", "listen": f"{h.LOOPBACK}:{port()}", "tcp": h.policy(True, "kernel")},
                  {"name": "quickack", "listen": f"{h.LOOPBACK}:{port()}", "tcp": h.policy(True, "on")}],
        "target": [{"name": "http", "listen": f"{h.LOOPBACK}:{port()}"}],
    })
    links = peers.links_text(d)
    link_of = peers.share_links(links)
    cores = [c for c in ("xray", "sing-box", "mihomo") if peers.find(c)]
    for c in ("xray", "sing-box", "mihomo"):
        if c not in cores:
            print(f"NOTE {c}: not found, left out", flush=True)
    target = f"http://{h.LOOPBACK}:{d.target_port}/generate_204"
    load_before = os.getloadavg()
    rows = []
    for ack in ("kernel", "quickack"):
        plain, vision = link_of[f"{ack}-tester"], link_of[f"{ack}-tester-vision"]
        paths = [f"builtin={plain}", f"builtin-vision={vision}", f"nagle={plain}", f"nagle-vision={vision}"]
        running = []
        try:
            for core in cores:
                for suffix in ("", "-vision"):
                    entry, socks = peers.inbound_port(), peers.inbound_port()
                    text, ext = peers.core_config(core, links, f"{ack}-tester{suffix}", entry, socks)
                    running.append(peers.Core(core, text, [entry, socks], suffix=ext))
                    peers.ready_through(core, entry, d.target_port)
                    paths.append(f"{core}{suffix}=http://{h.LOOPBACK}:{entry}")
            run_dir = out / ack
            argv = [str(h.CLIENT_BIN / "vlessbench"), "run", "--target", target, "--new", str(args.new),
                    "--reuse", str(args.reuse), "--warmup", str(args.warmup), "--out", str(run_dir), "--seed", "29",
                    "--nagle-paths", "nagle,nagle-vision"]
            for p in paths:
                argv += ["--path", p]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
            print(r.stdout, flush=True)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
        finally:
            for c in running:
                c.stop()
        summary = json.loads((run_dir / "summary.json").read_text())
        for name, p in summary["paths"].items():
            if p.get("baseline"):
                continue
            rows.append((name, ack, p["new"]["paired_delta_median_ms"], p["reuse"]["paired_delta_median_ms"],
                         p["new"]["median_ms"], p["stall"]["verdict"]))
    load_after = os.getloadavg()
    d.stop()
    print("| path | ACK policy | new: added (paired median, ms) | reused: added (ms) | new median (ms) | stall |")
    print("|---|---|---|---|---|---|")
    for name, ack, new_d, reuse_d, new_m, stall in rows:
        fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"| {name} | {ack} | {fmt(new_d)} | {fmt(reuse_d)} | {fmt(new_m)} | {stall} |")
    print(f"\nload average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
          f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
