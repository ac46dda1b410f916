#!/usr/bin/env python3
"""What a new XHTTP connection costs per mode (issue 41), on loopback, with the runner's built-in
client (core/client/xhttp_client.hpp) and no core in between.

Starts a vlessbenchd with an XHTTP listener over TLS (HTTP/1.1) and one over plain TCP, a raw TLS
listener and an HTTP target, and Xray 25.9.11 as an XHTTP server over TLS h2 and h2c whose VLESS
outbound goes on to the raw TLS listener (so its samples are proven on the target as ours are,
and pay that second hop's TLS handshake too). One `vlessbench run` measures, interleaved at
random:

  h1-tls-MODE, h1-plain-MODE    our listener, MODE = packet-up, stream-up, stream-one
  h2-MODE, h2c-MODE             Xray's, MODE = packet-up, stream-one
  tls                           plain VLESS over raw TLS to our daemon (the floor)

and prints a markdown table of the paired median added latency vs direct (new and reused) with
the load average. Xray is found as the tests find it (tests/integration/harness/cores.py); without
it the Xray rows are left out. Every process it starts is stopped at exit.
Server against server (ours' XHTTP listener and Xray's XHTTP inbound, each relaying straight to
the target, the same Xray client in front of both) is `bench/run.py --only xhttp`.

Usage: bench/xhttp_latency.py [--bin BUILD/bin] [--new 100] [--reuse 100] [--warmup 10] [--out DIR]
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
    ap.add_argument("--reuse", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default="xhttp-latency-out")
    args = ap.parse_args()
    os.environ["VLESSBENCH_BIN"] = str(Path(args.bin).resolve())
    sys.path.insert(0, str(REPO / "tests" / "integration"))  # the harness package, shared with the tests
    import harness as h  # noqa: E402 - reads VLESSBENCH_BIN at import
    from harness import peers  # noqa: E402

    lo, port = h.LOOPBACK, h.free_port
    uuid = h.new_uuid()
    d = h.Daemon({
        "users": [{"name": "tester", "uuid": uuid}],
        "vless": [{"name": "xh-tls", "listen": f"{lo}:{port()}", "transport": "xhttp", "path": "/xh"},
                  {"name": "xh-plain", "listen": f"{lo}:{port()}", "transport": "xhttp", "path": "/xh", "tls": False},
                  {"name": "tls", "listen": f"{lo}:{port()}"}],
        "target": [{"name": "http", "listen": f"{lo}:{port()}"}],
    })
    links = peers.share_links(peers.links_text(d))
    paths = {"tls": links["tls-tester"]}
    for mode in ("packet-up", "stream-up", "stream-one"):
        paths[f"h1-tls-{mode}"] = peers.with_params(links["xh-tls-tester"].partition("#")[0], mode=mode)
        paths[f"h1-plain-{mode}"] = peers.with_params(links["xh-plain-tester"].partition("#")[0], mode=mode)
    core = None
    if peers.find("xray"):
        cert, key = h.make_cert(h.tempdir())
        p_tls, p_h2c = peers.inbound_port(), peers.inbound_port()
        inbound = {"listen": lo, "protocol": "vless", "settings": {"clients": [{"id": uuid}], "decryption": "none"}}
        xhttp = {"network": "xhttp", "xhttpSettings": {"path": "/xh", "mode": "auto"}}
        tls = {"alpn": ["h2"], "certificates": [{"certificateFile": str(cert), "keyFile": str(key)}]}
        core = peers.Core("xray", {
            "log": {"loglevel": "warning"},
            "inbounds": [{**inbound, "port": p_tls, "streamSettings": {**xhttp, "security": "tls", "tlsSettings": tls}},
                         {**inbound, "port": p_h2c, "streamSettings": {**xhttp, "security": "none"}}],
            "outbounds": [{"protocol": "vless",
                           "settings": {"vnext": [{"address": lo, "port": d.port("tls"),
                                                   "users": [{"id": uuid, "encryption": "none"}]}]},
                           "streamSettings": {"network": "tcp", "security": "tls",
                                              "tlsSettings": {"serverName": "localhost", "allowInsecure": True}}}],
        }, [p_tls, p_h2c])
        base = f"vless://{uuid}@{lo}:"
        for mode in ("packet-up", "stream-one"):
            paths[f"h2-{mode}"] = (f"{base}{p_tls}?security=tls&sni=localhost&allowInsecure=1&type=xhttp&path=%2Fxh"
                                   f"&mode={mode}&alpn=h2")
            paths[f"h2c-{mode}"] = f"{base}{p_h2c}?security=none&type=xhttp&path=%2Fxh&mode={mode}&alpn=h2"
    else:
        print("NOTE xray: not found, its rows left out", flush=True)
    out = Path(args.out)
    load_before = os.getloadavg()
    argv = [str(h.CLIENT_BIN / "vlessbench"), "run", "--target", f"http://{lo}:{d.target_port}/generate_204",
            "--new", str(args.new), "--reuse", str(args.reuse), "--warmup", str(args.warmup), "--out", str(out),
            "--seed", "41"]
    for name, link in paths.items():
        argv += ["--path", f"{name}={link}"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    finally:
        if core:
            core.stop()
        d.stop()
    print(r.stdout, flush=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    load_after = os.getloadavg()
    summary = json.loads((out / "summary.json").read_text())
    fmt = lambda v: "—" if v is None else f"{v:+.3f}"  # noqa: E731
    print("| path | new: added (paired median, ms) | new P95 (ms) | reused: added (ms) |")
    print("|---|---|---|---|")
    for name, p in summary["paths"].items():
        if not p.get("baseline"):
            print(f"| {name} | {fmt(p['new']['paired_delta_median_ms'])} | {p['new']['p95_ms']:.3f} | "
                  f"{fmt(p['reuse']['paired_delta_median_ms'])} |")
    print(f"\nload average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
          f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
