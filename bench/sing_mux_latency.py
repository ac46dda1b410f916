#!/usr/bin/env python3
"""Added latency of sing-mux (issue 29 item 5): new and reused requests through sing-box's and mihomo's local
HTTP CONNECT entries to the daemon's VLESS+TLS listener, plain and with each sing-mux protocol the daemon serves
(smux, yamux, h2mux), all paths interleaved at random in one `vlessbench run` with a direct baseline.

Starts on loopback (the harness package, tests/integration/harness/: ports, cleanup, the cores' own config checks):
one vlessbenchd (two VLESS+TLS listeners, quickack "kernel" and "on", and the HTTP target), and per core and
listener four clients of it: multiplex off,
smux, yamux, h2mux (one mux connection each, `max_connections` 1). A `new` sample through a multiplexing client is a
new stream on the client's open mux connection (the client's TCP+TLS+VLESS header were paid before the clock,
as docs/methodology.md "Mux: what new means" says for Mux.Cool); through a plain client it is a new VLESS+TLS
connection. Prints the runner's table; the run's files go to --out.

Usage: bench/sing_mux_latency.py [--bin BUILD/bin] [--out DIR] [--new N] [--reuse M] [--warmup W]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The harness package the tests use (tests/integration/harness/) and test_sing_mux's fixtures.
sys.path.insert(0, str(REPO / "tests" / "integration"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--out", default="sing-mux-latency")
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--reuse", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cores", default="sing-box,mihomo")
    args = ap.parse_args()
    os.environ["VLESSBENCH_BIN"] = args.bin
    import harness as h  # noqa: E402 - after VLESSBENCH_BIN is set
    from harness import peers  # noqa: E402
    import test_sing_mux as t  # noqa: E402 - its daemon, core configs and links: one copy of each

    paths = ["--path", "direct=direct"]
    cores = []
    # Both ACK policies: the daemon's "tls" listener (quickack = "kernel", delayed ACK) and its
    # QUICKACK twin "quick"; the cores' own TCP settings are theirs (Go sets TCP_NODELAY).
    for ack, listener in (("kernel", "tls"), ("quickack", "quick")):
        for core in args.cores.split(","):
            for proto in ("plain", "smux", "yamux", "h2mux"):
                if proto == "plain":
                    c = t.Core.__new__(t.Core)
                    c.entry, c.socks = peers.inbound_port(), peers.inbound_port()
                    # Multiplex off: the entry `vlessbenchd links` prints, as the tests' cores take it.
                    text, suffix = peers.core_config(core, t.links(), f"{listener}-{t.USER}", c.entry, c.socks)
                    c.core = peers.Core(core, text, [c.entry, c.socks], suffix=suffix)
                else:
                    c = t.Core(core, listener, proto)
                cores.append(c)
                t.ready_through(c.entry)
                paths += ["--path", f"{core}-{proto}-{ack}=http://{h.LOOPBACK}:{c.entry}"]
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().split()[:3]}", flush=True)
    r = subprocess.run([str(Path(args.bin) / "vlessbench"), "run", "--target",
                        f"http://{h.LOOPBACK}:{t.D.port('http')}/generate_204", *paths, "--new", str(args.new),
                        "--reuse", str(args.reuse), "--warmup", str(args.warmup), "--out", args.out])
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().split()[:3]}", flush=True)
    for c in cores:
        c.core.stop()
    t.ECHO.stop()
    t.D.stop()
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
