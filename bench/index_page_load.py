#!/usr/bin/env python3
"""What the index page's CPU costs the measurements (docs/reliability.md, issue 38 item 8): the p50 and
p95 of `GET /generate_204` on one keep-alive connection to the HTTP target, alone and while three
clients fetch the index page (index_links on, 16 users x 2 raw TLS listeners: 64 nodes, each with
its QR code) as fast as they can, each request with a Host of its own (h0.example, h1.example, ...,
the rotation that defeated the old 4-entry cache), then with the target's own address as Host.

Starts one vlessbenchd on loopback (the harness package, tests/integration/harness/).

Usage: bench/index_page_load.py [--bin BUILD/bin] [--requests N]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))

ACCEPT = "text/html,application/xhtml+xml,*/*;q=0.8"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    os.environ["VLESSBENCH_BIN"] = args.bin
    import harness as h  # noqa: E402 - after VLESSBENCH_BIN is set

    users = [{"name": f"u{i}", "uuid": h.new_uuid()} for i in range(16)]
    cfg = {"users": users,
           "vless": [{"name": f"v{i}", "listen": f"{h.LOOPBACK}:{h.free_port()}"} for i in range(2)],
           "target": [{"name": "http", "listen": f"{h.LOOPBACK}:{h.free_port()}", "index_links": True}]}
    with h.Daemon(cfg) as d:
        _, port = d.addr("http")

        def p50_generate_204() -> tuple[float, float]:
            times = []
            with socket.create_connection((h.LOOPBACK, port)) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                req = f"GET /generate_204 HTTP/1.1\r\nHost: {h.LOOPBACK}:{port}\r\n\r\n".encode()
                for _ in range(args.requests):
                    t0 = time.perf_counter_ns()
                    s.sendall(req)
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        buf += s.recv(4096)
                    times.append((time.perf_counter_ns() - t0) / 1e6)
            times.sort()
            return statistics.median(times), times[int(len(times) * 0.95)]

        def hammer(stop: threading.Event, rotate: bool, counts: dict, idx: int):
            n = 0
            while not stop.is_set():
                host = f"h{idx}-{n}.example" if rotate else f"{h.LOOPBACK}:{port}"
                with socket.create_connection((h.LOOPBACK, port)) as s:
                    s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nAccept: {ACCEPT}\r\nConnection: close\r\n\r\n"
                              .encode())
                    status = s.recv(16)[9:12].decode()
                    while s.recv(65536):
                        pass
                counts[status] = counts.get(status, 0) + 1
                n += 1

        print(f"alone: /generate_204 p50 {p50_generate_204()[0]:.3f} ms")
        for rotate in (True, False):
            stop, counts = threading.Event(), {}
            threads = [threading.Thread(target=hammer, args=(stop, rotate, counts, i)) for i in range(3)]
            start = time.monotonic()
            for t in threads:
                t.start()
            time.sleep(0.5)
            p50, p95 = p50_generate_204()
            stop.set()
            for t in threads:
                t.join()
            took = time.monotonic() - start
            what = "rotating Host" if rotate else "own address as Host"
            print(f"3 index-page clients, {what}: /generate_204 p50 {p50:.3f} ms, p95 {p95:.3f} ms; "
                  f"index answers {counts} ({sum(counts.values()) / took:.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
