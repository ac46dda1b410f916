#!/usr/bin/env python3
"""The clients users run (issue 28): mihomo 1.19, sing-box 1.11, Xray 25.9 and v2ray 4.34 as
clients of the daemon, each with the entry `vlessbenchd links` prints for every listener kind
(raw TLS, ws, ws with early data, HTTPUpgrade, gRPC), passed through the core's own checker
first, then driven through the entries users have:

- plain HTTP proxy (`curl -x`, what browsers do for http://) and CONNECT (`curl -p -x`): each
  answer's X-Vlessbench-Route names a VLESS session, of the right transport, that the access log
  has as a vless.session line;
- SOCKS5 UDP ASSOCIATE: datagrams to the [[udp_target]] echo, each echo's trailer naming a VLESS
  session, and DNS queries to the [[dns]] responder, each answer's TXT route naming one; the
  dns.query lines in the access log say vless.

Where a core lacks a transport (v2ray 4.34: no HTTPUpgrade, no gRPC) the pair is not tried and the
table says so. The cores are found as ../shared/peers/README.md says (harness/peers.py);
a missing one is a SKIP naming it. Every pair runs at once (a thread each), small counts.
"""
from __future__ import annotations

import concurrent.futures
import os
import subprocess
import time

import harness as h
from harness import peers
from harness import LOOPBACK, check

suite = h.Suite("test_cores")
h.require_binary()
COUNT = int(os.environ.get("VLESSBENCH_CORES_COUNT") or 5)
USER = "tester"

LISTENERS = {  # name -> (transport in the log, listener config)
    "tls": ("tls", {}),
    "ws": ("ws", {"transport": "ws", "path": "/ws"}),
    "wsed": ("ws", {"transport": "ws", "path": "/ed", "max_early_data": 2048}),
    "up": ("httpupgrade", {"transport": "httpupgrade", "path": "/up"}),
    "grpc": ("grpc", {"transport": "grpc", "service_name": "vb"}),
}
# What each core cannot do (its README in ../shared/peers, and v2ray 4.34's release).
UNSUPPORTED = {"v2ray": {"up": "no HTTPUpgrade in 4.34", "grpc": "no gRPC in 4.34"}}


def make_daemon() -> h.Daemon:
    port = h.free_port
    cfg = {
        "users": [{"name": USER, "uuid": h.new_uuid()}],
        "vless": [{"name": n, "listen": f"{LOOPBACK}:{port()}", **extra} for n, (_, extra) in LISTENERS.items()],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
        "udp_target": [{"name": "echo", "listen": f"{LOOPBACK}:{port()}"}],
        "dns": [{"name": "dns", "listen": f"{LOOPBACK}:{port()}"}],
    }
    return h.Daemon(cfg)


D = make_daemon()


def links() -> str:
    return peers.links_text(D)


def udp_port(name: str) -> int:
    section = "udp_target" if name == "echo" else "dns"
    return int(next(x for x in D.cfg[section] if x["name"] == name)["listen"].rsplit(":", 1)[1])


def core_config(core: str, listener: str, entry: int, socks: int) -> tuple[str, str]:
    return peers.core_config(core, links(), f"{listener}-{USER}", entry, socks)


route_session = peers.route_session


def http_checks(entry: int, transport: str) -> tuple[list[int], list[int]]:
    """COUNT plain-proxy GETs and COUNT CONNECT GETs: the sessions their route headers name."""
    url = f"http://{LOOPBACK}:{D.target_port}/generate_204"
    plain, tunnel = [], []
    for i in range(2 * COUNT):
        connect = i % 2 == 1
        args = ["-s", "-D", "-", "-o", "/dev/null", "--max-time", "10", "-x", f"http://{LOOPBACK}:{entry}"]
        r = subprocess.run([h.CURL, *args, *(["-p"] if connect else []), url], capture_output=True, timeout=20)
        head = r.stdout.decode(errors="replace")
        # CONNECT: the proxy's own "200 Connection established" comes first.
        answer = head.split("\r\n\r\n")[-2] if connect and head.count("\r\n\r\n") >= 2 else head
        check(" 204" in answer.split("\r\n", 1)[0], f"{'CONNECT' if connect else 'plain'} GET: "
                                                    f"{answer[:200]!r} (curl rc {r.returncode})")
        route = next((line.split(":", 1)[1].strip() for line in answer.splitlines()
                      if line.lower().startswith("x-vlessbench-route:")), "")
        (tunnel if connect else plain).append(route_session(route, transport, "GET"))
    return plain, tunnel


def udp_checks(socks: int, transport: str) -> tuple[list[int], list[int]]:
    return peers.udp_checks(socks, udp_port("echo"), udp_port("dns"), COUNT, transport)


def ready_through(core: str, entry: int) -> None:
    peers.ready_through(core, entry, D.target_port)


def run_pair(core: str, listener: str) -> dict:
    transport = LISTENERS[listener][0]
    entry, socks = peers.inbound_port(), peers.inbound_port()
    while socks == entry:
        socks = peers.inbound_port()
    text, suffix = core_config(core, listener, entry, socks)
    c = peers.Core(core, text, [entry, socks], suffix=suffix)
    try:
        ready_through(core, entry)
        plain, tunnel = http_checks(entry, transport)
        echoes, dns = udp_checks(socks, transport)
    except Exception as e:  # noqa: BLE001 - reported in the table with the core's output
        raise AssertionError(f"{core} over {listener}: {e}\n--- {core} output ---\n{c.output()[-1500:]}") from None
    finally:
        c.stop()
    return {"plain": plain, "connect": tunnel, "echo": echoes, "dns": dns}


def matrix(core: str) -> None:
    peers.require(core)
    pairs = [n for n in LISTENERS if n not in UNSUPPORTED.get(core, {})]
    for n, why in UNSUPPORTED.get(core, {}).items():
        print(f"NOTE {core} over {n}: not tried ({why})", flush=True)
    mark = D.mark()
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
        futures = {n: pool.submit(run_pair, core, n) for n in pairs}
    failures, results = [], {}
    for n, f in futures.items():
        try:
            results[n] = f.result()
        except Exception as e:  # noqa: BLE001
            failures.append(str(e))
    # Every session an answer named is in the access log, as this listener's.
    deadline = time.monotonic() + 15
    for n, res in results.items():
        want = set(res["plain"] + res["connect"] + res["echo"] + res["dns"])
        while True:
            logged = {e["session"] for e in D.events("vless.session", since=mark, listener=n)}
            if want <= logged or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not want <= logged:
            failures.append(f"{core} over {n}: sessions {sorted(want - logged)[:5]} named by answers have no "
                            f"vless.session line of listener {n}")
        print(f"FIGURE {core}_{n} = plain {len(res['plain'])}/{COUNT} connect {len(res['connect'])}/{COUNT} "
              f"udp_echo {len(res['echo'])}/{COUNT} dns {len(res['dns'])}/{COUNT}", flush=True)
    queries = [q for q in D.events("dns.query", since=mark) if q.get("name", "").endswith("vlessbench.test")]
    check(all(q.get("route") == "vless" for q in queries), [q for q in queries if q.get("route") != "vless"][:2])
    check(not failures, "\n\n".join(failures))


@suite.test
def xray_every_transport_and_entry():
    matrix("xray")


@suite.test
def sing_box_every_transport_and_entry():
    matrix("sing-box")


@suite.test
def mihomo_every_transport_and_entry():
    matrix("mihomo")


@suite.test
def v2ray_every_transport_and_entry():
    matrix("v2ray")


if __name__ == "__main__":
    suite.run()
