"""XHTTP side by side (issue 41): vlessbenchd's XHTTP listener against Xray 25.9.11's XHTTP
inbound, with the same client in front of both: Xray 25.9.11 itself, one process, an HTTP entry
(CONNECT) per (server, carrier, mode), each routed to an XHTTP VLESS outbound of that mode.

Carriers: "h2" is TLS 1.3 with Xray's default ALPN (h2, its XMUX: a new VLESS connection is a new
HTTP/2 stream on a connection the client keeps); "h1tls" TLS 1.3 with ALPN http/1.1 (no XMUX: the
GET and the uplink POSTs each on a TLS connection of their own); "h1" plain TCP, where Xray's
client speaks HTTP/1.1 (no TLS, no XMUX). Modes: packet-up, stream-up, stream-one. Xray's server relays to the
bench's HTTP target with its freedom outbound, as our daemon does; both serve the bench's own
certificate. bench/run.py drives it (`--only xhttp`): the latency paths go into one interleaved
`vlessbench run`, the bulk transfers through vlessbench_load's --http-proxy, one at a time, the
server's CPU read from /proc/PID/stat around each. Python 3 stdlib only.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

import harness as h
from harness import cores

HOST = h.LOOPBACK
GIB = 1 << 30
PATH = "/xhttp"
MODES = ("packet-up", "stream-up", "stream-one")
CARRIERS = {"h2": "TLS h2 (XMUX)", "h1tls": "TLS HTTP/1.1", "h1": "plain HTTP/1.1"}
SECURITY = {"h2": "tls", "h1tls": "tls", "h1": "plain"}  # the listener (ours and Xray's) each carrier reaches
# TLS HTTP/1.1: Xray 25.9.11's default ClientHello (uTLS, Chrome's) offers h2 first whatever
# `alpn` says, and its client then speaks HTTP/1.1 all the same: Xray's own server negotiates h2
# and refuses the request ("http2: server: error reading preface ... bogus greeting"). "unsafe"
# is Go's own TLS, whose ClientHello offers only the `alpn` given.
H1TLS = {"alpn": ["http/1.1"], "fingerprint": "unsafe"}
SERVERS = ("ours", "xray")


def our_listeners() -> list[dict]:
    """Our daemon's XHTTP listeners for the comparison (path PATH, every mode served): over TLS
    (ALPN h2 or http/1.1) and plain (HTTP/1.1 and h2c on one port)."""
    return [{"name": "xhttp-tls", "transport": "xhttp", "path": PATH},
            {"name": "xhttp-plain", "transport": "xhttp", "path": PATH, "tls": False}]


def xray_server(uuid: str, cert: Path, key: Path, ports: dict[str, int]) -> dict:
    """Xray as an XHTTP VLESS server, as ours: an inbound per security (mode auto, path PATH;
    "tls": TLS 1.3 with ALPN h2 and http/1.1, the bench's certificate; "plain": none), freedom outbound."""
    inbounds = []
    for security, port in ports.items():
        stream: dict = {"network": "xhttp", "xhttpSettings": {"path": PATH, "mode": "auto"}}
        if security == "tls":
            stream["security"] = "tls"
            stream["tlsSettings"] = {"minVersion": "1.3", "alpn": ["h2", "http/1.1"],
                                     "certificates": [{"certificateFile": str(cert), "keyFile": str(key)}]}
        else:
            stream["security"] = "none"
        inbounds.append({"tag": f"xhttp-{security}", "listen": HOST, "port": port, "protocol": "vless",
                         "settings": {"clients": [{"id": uuid}], "decryption": "none"}, "streamSettings": stream})
    return {"log": {"loglevel": "warning"}, "inbounds": inbounds,
            "outbounds": [{"protocol": "freedom", "settings": {}}]}


def xray_client(uuid: str, entries: dict[tuple[str, str, str], int], servers: dict[tuple[str, str], int]) -> dict:
    """The one client: per (server, carrier, mode) an HTTP inbound routed to an XHTTP VLESS
    outbound of that mode to servers[(server, security)]; "h2": no ALPN named (Xray's default: h2
    and its default XMUX), "h1tls": ALPN http/1.1 (H1TLS); SNI localhost, the certificate not checked."""
    inbounds, outbounds, rules = [], [], []
    for (server, carrier, mode), entry in entries.items():
        tag = f"{server}-{carrier}-{mode}"
        stream: dict = {"network": "xhttp", "xhttpSettings": {"path": PATH, "mode": mode}, "security": "none"}
        if SECURITY[carrier] == "tls":
            stream["security"] = "tls"
            stream["tlsSettings"] = {"serverName": "localhost", "allowInsecure": True,
                                     **(H1TLS if carrier == "h1tls" else {})}
        outbounds.append({"tag": tag, "protocol": "vless", "streamSettings": stream,
                          "settings": {"vnext": [{"address": HOST, "port": servers[(server, SECURITY[carrier])],
                                                  "users": [{"id": uuid, "encryption": "none"}]}]}})
        inbounds.append({"tag": tag, "listen": HOST, "port": entry, "protocol": "http", "settings": {}})
        rules.append({"type": "field", "inboundTag": [tag], "outboundTag": tag})
    return {"log": {"loglevel": "warning"}, "inbounds": inbounds, "outbounds": outbounds,
            "routing": {"rules": rules}}


def probe(entry: int, target_port: int) -> str | None:
    """One GET /generate_204 through an entry (CONNECT, then the GET): None if answered 204, else why not."""
    try:
        with socket.create_connection((HOST, entry), timeout=5) as c:
            c.settimeout(5)
            hp = f"{HOST}:{target_port}"
            c.sendall(f"CONNECT {hp} HTTP/1.1\r\nHost: {hp}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 4096:
                chunk = c.recv(4096)
                if not chunk:
                    break
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                return f"CONNECT answered {head[:40]!r}"
            c.sendall(f"GET /generate_204 HTTP/1.1\r\nHost: {hp}\r\n\r\n".encode())
            got = c.recv(4096)
            return None if got.startswith(b"HTTP/1.1 204") else f"GET /generate_204 answered {got[:40]!r}"
    except OSError as e:
        return f"{type(e).__name__}: {e}"


class Side:
    """Xray's XHTTP server and the Xray client, started (configs through `xray run -test` first)
    and waited for until a GET through every entry is answered (10 s each at most)."""

    def __init__(self, exe: Path, work: Path, uuid: str, cert: Path, key: Path, target_port: int,
                 our_ports: dict[str, int]):
        self.dir = work / "xhttp"
        self.dir.mkdir()
        self.target_port = target_port
        self.server_ports = {sec: h.free_port(low=True) for sec in ("tls", "plain")}
        self.entries = {(w, c, m): h.free_port(low=True) for w in SERVERS for c in CARRIERS for m in MODES}
        servers = {**{("ours", sec): p for sec, p in our_ports.items()},
                   **{("xray", sec): p for sec, p in self.server_ports.items()}}
        self.server = self._start(exe, "server", xray_server(uuid, cert, key, self.server_ports),
                                  list(self.server_ports.values()))
        # Xray 25.9.11's HTTP/1.1 packet-up client keeps its upload connections in a Go sync.Pool
        # that each GC empties, closing connections with POST answers unread (a reset that can
        # drop a POST; docs/clients.md): fewer GCs make it rare. The same client for both servers.
        self.client = self._start(exe, "client", xray_client(uuid, self.entries, servers),
                                  list(self.entries.values()), env={**os.environ, "GOGC": "2000"})
        self.errors: dict[tuple[str, str, str], str] = {}
        for key_, entry in self.entries.items():
            deadline = time.monotonic() + 10
            while (err := probe(entry, target_port)) is not None and time.monotonic() < deadline:
                time.sleep(0.2)
            if err is not None:
                self.errors[key_] = f"no answer through Xray's client within 10 s: {err}"

    def _start(self, exe: Path, name: str, config: dict, ports: list[int], env: dict | None = None):
        path = self.dir / f"{name}.json"
        path.write_text(json.dumps(config, indent=1))
        cores.check_config("xray", exe, path)
        proc = h.spawn(cores.argv("xray", exe, path), stdout=open(self.dir / f"{name}.log", "wb"),
                       stderr=subprocess.STDOUT, cwd=self.dir, env=env)
        h.wait_ports(ports, proc=proc, what=f"xray xhttp {name}", timeout=15)
        return proc

    def procs(self) -> list[subprocess.Popen]:
        return [self.server, self.client]

    def paths(self) -> list[str]:
        """`vlessbench run` paths xhttp-SERVER-CARRIER-MODE, one per entry that answered."""
        return [f"xhttp-{w}-{c}-{m}=http://{HOST}:{p}" for (w, c, m), p in self.entries.items()
                if (w, c, m) not in self.errors]


def measure_bulk(side: Side, server_pid: dict[str, int], run_load: Callable, load: Path, total: int,
                 rounds: int) -> dict:
    """total bytes down (/bytes/N) and up (POST /sink) through one VLESS connection per server,
    carrier and mode, rounds times (server order alternated): the load generator CONNECTs through
    the Xray client's entry. Per (carrier, mode, direction) and server: every round's MB/s, the
    server's and the client's CPU share of the median round; per (carrier, mode) and server the
    server's CPU-seconds per GiB of each round (its download and upload together). A failed round
    gives that cell its reason, never a figure."""
    res: dict = {"bulk": {}, "cpu": {}}
    for rnd in range(rounds):
        for carrier in CARRIERS:
            for mode in MODES:
                order = SERVERS if rnd % 2 == 0 else tuple(reversed(SERVERS))
                for which in order:
                    cpu = [0.0, 0]
                    for direction in ("down", "up"):
                        one = _bulk_once(side, server_pid[which], run_load, load, total, (which, carrier, mode),
                                         direction)
                        res["bulk"].setdefault(f"{carrier}-{mode}-{direction}", {}).setdefault(which, []).append(one)
                        if "error" not in one:
                            cpu[0] += one["server_cpu_seconds"]
                            cpu[1] += one["bytes"]
                        time.sleep(0.3)
                    res["cpu"].setdefault(f"{carrier}-{mode}", {}).setdefault(which, []).append(
                        cpu[0] / (cpu[1] / GIB) if cpu[1] == 2 * total else None)
    return res


def _bulk_once(side: Side, pid: int, run_load: Callable, load: Path, total: int, key: tuple[str, str, str],
               direction: str) -> dict:
    if key in side.errors:
        return {"error": side.errors[key]}
    for p in side.procs():
        if p.poll() is not None:
            raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; logs in {side.dir}")
    c0, k0 = h.cpu_seconds(pid), h.cpu_seconds(side.client.pid)
    try:
        j = run_load(load, direction, ["--target", f"{HOST}:{side.target_port}", "--http-proxy",
                                       f"{HOST}:{side.entries[key]}", "--workers", 1, "--threads", 1,
                                       "--bytes", total, "--seconds", 120], timeout=150)
    except RuntimeError as e:
        return {"error": str(e)[:300]}
    if j["failed"] or j["bytes"] != total:
        return {"error": f"{j['failed']} failed, {j['bytes']} of {total} bytes: {j.get('error')}"}
    used = h.cpu_seconds(pid) - c0
    return {"mbytes_per_second": j["mbytes_per_second"], "seconds": j["seconds"], "bytes": j["bytes"],
            "server_cpu_seconds": used, "server_cpu_share": used / j["seconds"],
            "client_cpu_share": (h.cpu_seconds(side.client.pid) - k0) / j["seconds"]}


def print_pace(res: dict) -> None:
    """Who set the pace: the server's and Xray client's CPU share of a core, per bulk case and server (median round)."""
    print("\nXHTTP bulk, who set the pace (CPU share of a core: Xray client / server, median round):")
    for key, per in res.get("bulk", {}).items():
        parts = []
        for which, rounds in per.items():
            ok = sorted((r for r in rounds if "error" not in r), key=lambda r: r["mbytes_per_second"])
            if len(ok) < len(rounds) or not ok:
                parts.append(f"{which} FAILED")
                continue
            mid = ok[len(ok) // 2]
            parts.append(f"{which} {mid['client_cpu_share']:.2f}/{mid['server_cpu_share']:.2f}")
        print(f"  {key}: " + ", ".join(parts))
