#!/usr/bin/env python3
"""One-command benchmark: vlessbenchd's VLESS+TLS server against v2ray 4.34's (issue 7), Xray
25.9's and sing-box 1.11's, and the HAProxy TLS floor (issue 26).

Starts, on loopback ports >= 20000:
  - an HTTP target (a target-only vlessbenchd) that both servers relay to, and the direct floor uses;
  - our VLESS+TLS server (a VLESS-only vlessbenchd) and v2ray's (vless inbound, freedom outbound),
    same ECDSA P-256 certificate, TLS 1.3 only, TCP_NODELAY on (v2ray/Go sets it by default);
  - the same pair over WebSocket (path /ws, TLS below): our ws listener and a v2ray ws inbound;
  - four v2ray clients (http inbound -> vless outbound), one per server and transport;
  - socat, a plain TCP forwarder in front of the target: the floor of what any relay adds.
Then measures, ours and v2ray's alternately:
  1. new-connection / reused added latency (paired median vs direct; `vlessbench run`, all paths
     interleaved at random in one run), with the runner's built-in VLESS client and with v2ray's
     client (HTTP CONNECT inbound), over raw TLS and over WebSocket;
  2. handshakes/s: closed loop, W workers for T s (TCP + TLS 1.3 + VLESS + GET /generate_204);
  3. bulk: 1 GiB download (/bytes/N) and 1 GiB upload (POST /sink) through one session, and the
     same 1 GiB split over 16 parallel sessions;
  4. RSS per idle session: VmRSS before and with 1,000 idle sessions open;
  5. CPU-seconds per GiB relayed (utime+stime of the server process over the bulk runs);
  6. UDP round trips (issue 12; bench/udp_rtt.py): one datagram at a time to the target's
     [[udp_target]] echo, direct and through v2ray clients' SOCKS5 UDP (VLESS command 2, and a
     Mux.Cool UDP sub-connection) to each server;
  7. Mux.Cool (issue 12): a v2ray client with "mux" on as two more latency paths (phase 1) and
     256 MiB down/up through one sub-connection. A server whose mux client cannot carry one request
     gets FAILED and the reason, never a figure.
  8. Issue 26: Xray and sing-box as VLESS servers on every transport (harness/cores.py writes their
     configs and those of their own clients), HAProxy terminating TLS in front of the target (the
     floor: the runner's tls:// path, vlessbench_load --tls-server), in every phase that applies;
     one side-by-side table, each cell with its 95% CI, and who set the pace.
  9. XHTTP (issue 41; bench/xhttp_side.py, --only xhttp runs it alone): our XHTTP listeners
     against Xray 25.9.11's XHTTP inbound, the same Xray 25.9.11 client in front of both (an HTTP
     entry per server, carrier and mode): new/reused added latency, 1-connection download and
     upload and the server's CPU-seconds per GiB, per mode (packet-up, stream-up, stream-one) over
     TLS h2 (Xray's default, XMUX), TLS HTTP/1.1 and plain HTTP/1.1, rows in the side-by-side table.
Prints the tables and writes JSON (--out; --markdown FILE: the side-by-side table for the docs).
Python 3 stdlib only; builds on the integration tests' harness package (tests/integration/harness/:
processes, ports, the certificate, our daemons, v2ray's and the cores' configs), so every process it
starts is killed at exit, on Ctrl-C and on errors; every wait is bounded.

Usage: bench/run.py [--bin BUILD/bin] [--out bench-result.json] [--quick] [--only PHASES] [--markdown FILE]

Over 600 lines: one setup and one report for every phase, kept together so that a reader sees
what is measured against what in one place; the UDP client and its statistics are in udp_rtt.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
import uuid as uuidlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The harness package the integration tests use (tests/integration/harness/): one registry of every
# process started (killed at exit, on SIGTERM and Ctrl-C, and by the kernel if this interpreter
# dies), free ports, waits for a port, temp folders, the test certificate, vlessbenchd from a config
# dict, v2ray config pieces, and cores.py (where Xray, sing-box and HAProxy are, their configs).
sys.path.insert(0, str(REPO / "tests" / "integration"))
import harness as h  # noqa: E402
from harness import cores  # noqa: E402
import udp_rtt  # noqa: E402  bench/udp_rtt.py: the SOCKS5 UDP client and its statistics
import xhttp_side  # noqa: E402  bench/xhttp_side.py: XHTTP, ours against Xray's server, Xray's client

HOST = h.LOOPBACK
GIB = 1 << 30
CORES = os.cpu_count() or 1

h.handle_signals(signal.SIGINT)


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 15) -> None:
    h.wait_ports([port], proc=proc, what=what, timeout=timeout)


def run_load(load: Path, mode: str, args: list, timeout: float) -> dict:
    rc, out = h.load_json(load, mode, *args, timeout=timeout)
    if rc != 0:
        raise RuntimeError(f"vlessbench_load {mode} {args}: exit {rc}: {out}")
    return out


def measure_crypto(load: Path) -> dict:
    """The handshake's public-key operations, microseconds each: in the BoringSSL we link
    (vlessbench_load crypto) and, for reference, in OpenSSL 3 (`openssl speed`) on this machine."""
    out = {"boringssl": run_load(load, "crypto", ["--max", 2000], timeout=60)}
    r = subprocess.run(["openssl", "speed", "-seconds", "1", "ecdsap256", "ecdhx25519"],
                       capture_output=True, text=True, timeout=60)
    ref = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if "(nistp256)" in line and len(f) >= 7:
            ref["ecdsa_p256_sign_us"] = round(1e6 / float(f[-2]), 1)
            ref["ecdsa_p256_verify_us"] = round(1e6 / float(f[-1]), 1)
        elif "(X25519)" in line:
            ref["x25519_op_us"] = round(1e6 / float(f[-1]), 1)
    out["openssl3"] = ref
    return out


# ---------------------------------------------------------------------------------------------
# The setup


class Setup:
    def __init__(self, bindir: Path, work: Path, threads: int):
        self.bindir = bindir
        self.work = work
        self.uuid = str(uuidlib.uuid4())
        self.cert, self.key = h.make_cert(work)
        # Our daemons listen on port 0 and report the ports they bound (h.Daemon reads them back); the
        # other servers' and clients' ports are chosen here.
        self.v2_port = h.free_port()
        self.ours_http, self.v2_http = h.free_port(), h.free_port()
        # The same over WebSocket (path /ws, TLS below): our ws listener and a v2ray ws inbound, and a
        # v2ray ws client for each (v2ray 4.34 sends no early data, so neither does anyone here).
        self.v2_ws_port = h.free_port()
        self.ours_ws_http, self.v2_ws_http = h.free_port(), h.free_port()
        # Xray 25.9 and sing-box 1.11 as VLESS servers, one inbound per transport, and HAProxy as a
        # bare TLS terminator in front of the target (the floor); each left out, with the reason,
        # where its binary is not found.
        self.peers = {name: cores.find(name) for name in ("xray", "sing-box", "haproxy")}
        self.peer_ports = {"xray": {t: h.free_port(low=True) for t in cores.SERVER_TRANSPORTS},
                           "sing-box": {t: h.free_port() for t in cores.SERVER_TRANSPORTS},
                           "haproxy": {"tcp": h.free_port()}}
        self.xray_mux_http = h.free_port()
        # UDP (issue 12): the target's [[udp_target]] echo; a v2ray client per server whose SOCKS5
        # inbound ("udp": true) sends VLESS command 2; and a v2ray client per server with Mux.Cool on
        # ("mux": {"enabled": true}) behind an http inbound (requests, bulk) and a SOCKS5 one (UDP).
        self.ours_socks, self.v2_socks = h.free_port(proto="tcp+udp"), h.free_port(proto="tcp+udp")
        self.ours_mux_http, self.v2_mux_http = h.free_port(), h.free_port()
        self.ours_mux_socks, self.v2_mux_socks = h.free_port(proto="tcp+udp"), h.free_port(proto="tcp+udp")
        policy = h.policy(True, "kernel")
        limits = {"max_sessions": 100000, **h.ONE_ADDRESS_LOAD}
        # The target runs in its own vlessbenchd, so that the servers under test only relay: the
        # CPU and RSS read from /proc are the relay's alone, for ours and for v2ray alike.
        self.target_config = {
            "log": {"level": "warn"}, "limits": limits, "admin": {"enabled": False},
            "target": [{"name": "http", "listen": h.ANY_PORT, "tcp": policy}],
            "udp_target": [{"name": "udp", "listen": h.ANY_PORT}]}
        # Issue 26: our httpupgrade and gRPC listeners too, for the side by side with Xray and sing-box.
        vless = [{"name": "vless"}, {"name": "ws", "transport": "ws", "path": cores.WS_PATH},
                 {"name": "hu", "transport": "httpupgrade", "path": cores.HU_PATH},
                 {"name": "grpc", "transport": "grpc", "service_name": cores.GRPC_SERVICE}]
        # Issue 41: our XHTTP listeners (TLS: h2 or http/1.1 by ALPN; plain), for the xhttp phase.
        vless += xhttp_side.our_listeners()
        self.ours_config = {
            "log": {"level": "warn"}, "tls": {"cert": str(self.cert), "key": str(self.key), "min_version": "1.3"},
            "limits": {**limits, "threads": threads},
            "admin": {"listen": h.ANY_PORT},  # on by default (the state hub's cost included)
            "users": [{"name": "bench", "uuid": self.uuid}],
            "vless": [{"name": v["name"], "listen": h.ANY_PORT, "tcp": policy, "upstream_tcp": policy,
                       **{k: x for k, x in v.items() if k != "name"}} for v in vless]}
        # Each started and waited for until its ports file says every listener is bound and each
        # accepts (config, logs and access log in work/target, work/ours).
        self.target_d = h.Daemon(self.target_config, binary=bindir / "vlessbenchd", directory=work / "target")
        self.ours_d = h.Daemon(self.ours_config, binary=bindir / "vlessbenchd", directory=work / "ours")
        self.target, self.ours = self.target_d.proc, self.ours_d.proc
        self.target_port, self.udp_port = self.target_d.port("http"), self.target_d.port("udp")
        self.ours_port, self.ours_ws_port, self.ours_hu_port, self.ours_grpc_port = (
            self.ours_d.port(v["name"]) for v in vless[:4])
        self.xhttp: xhttp_side.Side | None = None  # started by start_xhttp() for the xhttp phase
        tls_server = {"minVersion": "1.3",
                      "certificates": [{"certificateFile": str(self.cert), "keyFile": str(self.key)}]}
        v2_server = {
            "log": {"loglevel": "warning"},
            "inbounds": [{"listen": HOST, "port": self.v2_port, "protocol": "vless",
                          "settings": {"clients": [{"id": self.uuid}], "decryption": "none"},
                          "streamSettings": {"network": "tcp", "security": "tls", "tlsSettings": tls_server}},
                         {"listen": HOST, "port": self.v2_ws_port, "protocol": "vless",
                          "settings": {"clients": [{"id": self.uuid}], "decryption": "none"},
                          "streamSettings": {"network": "ws", "security": "tls", "tlsSettings": tls_server,
                                             "wsSettings": {"path": "/ws"}}}],
            "outbounds": [{"protocol": "freedom", "settings": {}}],
        }
        (work / "v2ray-server.json").write_text(json.dumps(v2_server, indent=1))
        socks, http = h.v2ray_socks_inbound, h.v2ray_http_inbound
        self.client_names = ("ours", "v2ray", "ours-ws", "v2ray-ws", "ours-udp", "v2ray-udp", "ours-mux", "v2ray-mux",
                             "xray-mux")
        for name, inbounds, server_port, network, mux in (
                ("ours", [http(self.ours_http)], self.ours_port, "tcp", False),
                ("v2ray", [http(self.v2_http)], self.v2_port, "tcp", False),
                ("ours-ws", [http(self.ours_ws_http)], self.ours_ws_port, "ws", False),
                ("v2ray-ws", [http(self.v2_ws_http)], self.v2_ws_port, "ws", False),
                ("ours-udp", [socks(self.ours_socks)], self.ours_port, "tcp", False),
                ("v2ray-udp", [socks(self.v2_socks)], self.v2_port, "tcp", False),
                ("ours-mux", [http(self.ours_mux_http), socks(self.ours_mux_socks)], self.ours_port, "tcp", True),
                ("v2ray-mux", [http(self.v2_mux_http), socks(self.v2_mux_socks)], self.v2_port, "tcp", True),
                ("xray-mux", [http(self.xray_mux_http)], self.peer_ports["xray"]["tcp"], "tcp", True)):
            outbound = h.v2ray_vless_outbound(server_port, self.uuid, mux_concurrency=8 if mux else None,
                                              ws_path=cores.WS_PATH if network == "ws" else None)
            cfg = {"log": {"loglevel": "warning"}, "inbounds": inbounds, "outbounds": [outbound]}
            (work / f"v2ray-client-{name}.json").write_text(json.dumps(cfg, indent=1))

        v2ray = h.V2RAY
        self.v2 = h.spawn([v2ray, "-config", work / "v2ray-server.json"], stdout=open(work / "v2ray-server.log", "wb"),
                          stderr=subprocess.STDOUT)
        running = [n for n in self.client_names if n != "xray-mux" or self.peers["xray"]]
        self.clients = [h.spawn([v2ray, "-config", work / f"v2ray-client-{n}.json"],
                              stdout=open(work / f"v2ray-client-{n}.log", "wb"), stderr=subprocess.STDOUT)
                        for n in running]
        # The v2ray mux client in front of each Mux.Cool server (its CPU share says who set the pace).
        self.mux_clients = {n.removesuffix("-mux"): p for n, p in zip(running, self.clients) if n.endswith("-mux")}
        self.others = self.start_peers()
        wait_port(self.v2_port, self.v2, "v2ray server")
        wait_port(self.ours_http, self.clients[0], "v2ray client (ours)")
        wait_port(self.v2_http, self.clients[1], "v2ray client (v2ray)")
        wait_port(self.v2_ws_port, self.v2, "v2ray server (ws)")
        wait_port(self.ours_ws_http, self.clients[2], "v2ray ws client (ours)")
        wait_port(self.v2_ws_http, self.clients[3], "v2ray ws client (v2ray)")
        for port, client, what in ((self.ours_socks, 4, "ours-udp"), (self.v2_socks, 5, "v2ray-udp"),
                                   (self.ours_mux_http, 6, "ours-mux"), (self.ours_mux_socks, 6, "ours-mux"),
                                   (self.v2_mux_http, 7, "v2ray-mux"), (self.v2_mux_socks, 7, "v2ray-mux")):
            wait_port(port, self.clients[client], f"v2ray client ({what})")
        # The relay floor: socat, a plain user-space TCP forwarder (no TLS, no protocol), in front of
        # the target. What it adds is what any relay with its own upstream connection pays.
        self.relay_port = h.free_port()
        self.relay = h.spawn(["socat", f"TCP-LISTEN:{self.relay_port},bind={HOST},reuseaddr,fork,nodelay",
                            f"TCP:{HOST}:{self.target_port},nodelay"],
                           stdout=subprocess.DEVNULL, stderr=open(work / "socat.log", "wb"))
        wait_port(self.relay_port, self.relay, "socat relay")

    def start_peers(self) -> dict[str, subprocess.Popen]:
        """Xray, sing-box and HAProxy, each config passed through its own checker first; a missing
        binary leaves that server out (self.missing says why), a refused config or a server that
        does not open its ports fails the bench."""
        self.missing: dict[str, str] = {}
        started = {}
        pem = self.work / "haproxy.pem"
        pem.write_text(self.cert.read_text() + self.key.read_text())
        writers = {
            "xray": lambda: json.dumps(cores.xray_server(self.uuid, self.cert, self.key, HOST, self.peer_ports["xray"]), indent=1),
            "sing-box": lambda: json.dumps(cores.singbox_server(self.uuid, self.cert, self.key, HOST,
                                                                self.peer_ports["sing-box"]), indent=1),
            "haproxy": lambda: cores.haproxy_config(pem, HOST, self.peer_ports["haproxy"]["tcp"], self.target_port),
        }
        for name, exe in self.peers.items():
            if exe is None:
                self.missing[name] = f"{name} not found (VLESSBENCH_PEERS, {', '.join(map(str, cores.folders()))}, PATH)"
                print(f"  {self.missing[name]}: left out", file=sys.stderr)
                continue
            config = self.work / name / ("haproxy.cfg" if name == "haproxy" else "config.json")
            config.parent.mkdir()
            config.write_text(writers[name]())
            cores.check_config(name, exe, config)
            started[name] = h.spawn(cores.argv(name, exe, config), stdout=open(config.parent / f"{name}.log", "wb"),
                                  stderr=subprocess.STDOUT, cwd=config.parent)
        for name, proc in started.items():
            for port in self.peer_ports[name].values():
                wait_port(port, proc, name)
        if "xray" in started:
            wait_port(self.xray_mux_http, self.clients[-1], "v2ray client (xray-mux)")
        # Issue 28: the cores' own clients (Xray's, sing-box's) against every VLESS server over raw
        # TLS, each behind a local HTTP entry: latency paths CLIENTclient-SERVER.
        self.core_entries: dict[tuple[str, str], int] = {}
        # Issue 29: and with flow xtls-rprx-vision against each Vision server (ours: the raw-TLS
        # listener; Xray's and sing-box's Vision inbounds): paths CLIENTclient-SERVER-vision.
        servers = {"ours": self.ours_port, "v2ray": self.v2_port,
                   **{w: self.peer_ports[w]["tcp"] for w in ("xray", "sing-box") if w in started},
                   "ours-vision": self.ours_port,
                   **{f"{w}-vision": self.peer_ports[w]["vision"] for w in ("xray", "sing-box") if w in started}}
        for name in ("xray", "sing-box"):
            if name not in started:
                continue
            for server, port in servers.items():
                entry = h.free_port(low=True)
                config = self.work / name / f"client-{server}.json"
                flow = cores.FLOW if server.endswith("-vision") else ""
                config.write_text(json.dumps(cores.client(name, self.uuid, HOST, entry, port, flow), indent=1))
                cores.check_config(name, self.peers[name], config)
                started[f"{name}-client-{server}"] = proc = h.spawn(
                    cores.argv(name, self.peers[name], config), stdout=open(config.with_suffix(".log"), "wb"),
                    stderr=subprocess.STDOUT, cwd=config.parent)
                wait_port(entry, proc, f"{name} client to {server}")
                self.core_entries[(name, server)] = entry
        return started

    def start_xhttp(self) -> None:
        """Issue 41: Xray's XHTTP server and the Xray client in front of it and of ours
        (bench/xhttp_side.py); without Xray the phase is left out, with the reason."""
        if self.peers["xray"] is None:
            self.missing.setdefault("xray", "xray not found")
            return
        self.xhttp = xhttp_side.Side(self.peers["xray"], self.work, self.uuid, self.cert, self.key, self.target_port,
                                     {sec: self.ours_d.port(f"xhttp-{sec}") for sec in ("tls", "plain")})

    def servers(self) -> list[str]:
        """Every server under test that runs: ours, v2ray, then those of Xray, sing-box, HAProxy found."""
        return ["ours", "v2ray", *(w for w in self.others if w in SERVERS)]

    def server(self, which: str) -> tuple[int, subprocess.Popen]:
        if which in self.others:
            return self.peer_ports[which]["tcp"], self.others[which]
        return (self.ours_port, self.ours) if which == "ours" else (self.v2_port, self.v2)

    def peer_link(self, which: str, transport: str, mux: bool = False) -> str:
        """The built-in client's link to one of ours', Xray's or sing-box's listeners of a transport."""
        if which == "ours":
            port = {"tcp": self.ours_port, "vision": self.ours_port, "ws": self.ours_ws_port,
                    "httpupgrade": self.ours_hu_port, "grpc": self.ours_grpc_port}[transport]
        elif which == "v2ray":
            port = {"tcp": self.v2_port, "ws": self.v2_ws_port}[transport]
        else:
            port = self.peer_ports[which][transport]
        return cores.link(self.uuid, HOST, port, transport, f"{which}-{transport}", mux=mux)

    def link(self, which: str, ws: bool = False) -> str:
        return self.peer_link(which, "ws" if ws else "tcp")

    def load_args(self, which: str) -> list:
        """vlessbench_load arguments for a server, or the direct floor (which == 'direct'; not in
        the sessions mode, which always goes through a server)."""
        args = ["--target", f"{HOST}:{self.target_port}"]
        if which == "haproxy":  # the floor: TLS to HAProxy, then plain HTTP to the target behind it
            args += ["--tls-server", f"{HOST}:{self.server(which)[0]}"]
        elif which != "direct":
            args += ["--server", f"{HOST}:{self.server(which)[0]}", "--uuid", self.uuid]
        return args

    def probe_mux(self, which: str) -> str | None:
        """One GET /generate_204 through the mux client of a server (HTTP CONNECT to its http
        inbound): None if it answered 204, else why not (with our access log's last reject, if any).
        A server that does not speak Mux.Cool gets no figure in the mux rows, only this reason."""
        port = {"ours": self.ours_mux_http, "v2ray": self.v2_mux_http, "xray": self.xray_mux_http}[which]
        err = xhttp_side.probe(port, self.target_port)
        if err:
            err += " (through the mux sub)"
        if err and which == "ours":
            log = self.ours_d.access
            rejects = [json.loads(x) for x in (log.read_text().splitlines() if log.exists() else [])
                       if '"vless.reject"' in x]
            if rejects:
                r = rejects[-1]
                err += f"; our server: vless.reject reason={r.get('reason')} detail={r.get('detail')}"
        return err

    def check_alive(self) -> None:
        for p in [self.target, self.ours, self.v2, *self.clients, self.relay, *self.others.values(),
                  *(self.xhttp.procs() if self.xhttp else [])]:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; logs in {self.work}")

# ---------------------------------------------------------------------------------------------
# Measurements


def measure_idle(s: Setup, load: Path, sessions: int, rounds: int = 1) -> dict:
    """RSS per idle session of every server, rounds times (order alternated): the first round's
    figures at the top level of each server's entry (the v2ray comparison's rows), every round's
    per-session KiB in "rounds"."""
    out: dict = {}
    for r in range(rounds):
        order = s.servers() if r % 2 == 0 else list(reversed(s.servers()))
        for which in order:
            one = measure_idle_once(s, load, sessions, which)
            out.setdefault(which, dict(one, rounds=[]))["rounds"].append(one["per_session_kib"])
    return out


def measure_idle_once(s: Setup, load: Path, sessions: int, which: str) -> dict:
    pid = s.server(which)[1].pid
    time.sleep(0.5)
    before = h.rss_kib(pid)
    # Each session sends one GET / (so the server has dialled upstream and relayed once), reads
    # the answer, and holds until stdin closes; at most 64 are being opened at once.
    argv = [load, "sessions", *s.load_args(which), "--idle", sessions, "--opening", 64, "--path", "/",
            "--timeout", 60]
    p = h.spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()  # bounded: every opening gives up after --timeout
        ready = json.loads(line) if line.strip() else {"idle_open": 0, "errors": "no output"}
        time.sleep(1.0)  # let the server settle (Go's background allocations, lazy frees)
        with_sessions = h.rss_kib(pid)
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    n = ready.get("idle_open", 0)
    if n < sessions:
        raise RuntimeError(f"idle sessions on {which}: only {n}/{sessions} opened: {ready.get('errors')}")
    time.sleep(1.0)  # sessions close
    return {"rss_before_kib": before, "rss_with_sessions_kib": with_sessions, "sessions": n,
            "per_session_kib": (with_sessions - before) / n}


def run_runner(s: Setup, target: str, paths: list[str], new: int, reuse: int, warmup: int, out_dir: Path,
               timeout: float = 240) -> dict:
    """One interleaved `vlessbench run`; per path and mode the figures the table uses."""
    argv = [s.bindir / "vlessbench", "run", "--target", target, *[a for p in paths for a in ("--path", p)],
            "--new", new, "--reuse", reuse, "--warmup", warmup, "--out", out_dir,
            "--allow-mismatch"]  # the target is a separate process: it answers "direct" to both servers
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                       preexec_fn=h.set_pdeathsig)
    if r.returncode != 0:
        raise RuntimeError(f"vlessbench run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    summary = json.loads((out_dir / "summary.json").read_text())
    res = {"table": r.stdout.split("\n\n")[0]}
    for name, p in summary["paths"].items():
        res[name] = {mode: {k: p[mode].get(k) for k in ("n", "failed", "median_ms", "p95_ms",
                                                       "paired_delta_median_ms", "paired_delta_ci_low_ms",
                                                       "paired_delta_ci_high_ms", "errors")}
                     for mode in ("new", "reuse")}
    return res


def measure_latency(s: Setup, new: int, reuse: int, warmup: int) -> dict:
    paths = ["direct=direct", f"ours-builtin={s.link('ours')}", f"v2ray-builtin={s.link('v2ray')}",
             f"ours-v2client=http://{HOST}:{s.ours_http}", f"v2ray-v2client=http://{HOST}:{s.v2_http}",
             f"relay-floor=tcp://{HOST}:{s.relay_port}",
             f"ours-ws-builtin={s.link('ours', ws=True)}", f"v2ray-ws-builtin={s.link('v2ray', ws=True)}",
             f"ours-ws-v2client=http://{HOST}:{s.ours_ws_http}", f"v2ray-ws-v2client=http://{HOST}:{s.v2_ws_http}"]
    # Mux.Cool (issue 12): the v2ray client with "mux" on, through its http inbound; "new" is a new
    # sub-connection on a mux session the client already holds (no TLS handshake), "reused" the
    # same sub. A server the probe found not speaking Mux.Cool is left out, with the reason.
    mux_errors = {w: s.probe_mux(w) for w in ("ours", "v2ray")}
    for which, port in (("ours", s.ours_mux_http), ("v2ray", s.v2_mux_http)):
        if mux_errors[which] is None:
            paths.append(f"{which}-mux-v2client=http://{HOST}:{port}")
    paths += side_by_side_paths(s)
    res = run_runner(s, f"http://{HOST}:{s.target_port}/", paths, new, reuse, warmup, s.work / "latency")
    for which, err in mux_errors.items():
        if err is not None:
            res[f"{which}-mux-v2client"] = {"error": f"not measured: the mux probe failed: {err}"}
    return res


def side_by_side_paths(s: Setup) -> list[str]:
    """Issue 26: the built-in client to ours, Xray's and sing-box's listener of every transport
    (httpupgrade, gRPC and Vision: v2ray 4.34 has none; ours' raw TLS and ws paths are above), with
    Mux.Cool on (mux=on: every sample a sub-connection) to ours, v2ray's and Xray's raw TLS
    listener (sing-box has no Mux.Cool), and the HAProxy floor (tls://: TLS, then HTTP as if
    direct). Named SERVER-TRANSPORT-builtin; the rows read them with lat_path()."""
    paths = [f"ours-{t}-builtin={s.peer_link('ours', t)}" for t in ("httpupgrade", "grpc", "vision")]
    paths += [f"{w}-mux-builtin={s.peer_link(w, 'tcp', mux=True)}" for w in ("ours", "v2ray")]
    for which in ("xray", "sing-box"):
        if which in s.others:
            paths += [f"{which}-{t}-builtin={s.peer_link(which, t)}" for t in cores.SERVER_TRANSPORTS]
    if "xray" in s.others:
        paths.append(f"xray-mux-builtin={s.peer_link('xray', 'tcp', mux=True)}")
    if "haproxy" in s.others:
        paths.append(f"haproxy-floor=tls://{HOST}:{s.peer_ports['haproxy']['tcp']}")
    paths += [f"{c}client-{w}=http://{HOST}:{port}" for (c, w), port in s.core_entries.items()]
    return paths


def lat_path(which: str, transport: str) -> str:
    """The latency run's path name of a server's built-in-client path over a transport ("mux":
    raw TLS with Mux.Cool on; haproxy: the tls:// floor)."""
    if which == "haproxy":
        return "haproxy-floor"
    if which in ("ours", "v2ray") and transport in ("tcp", "ws"):
        return f"{which}-builtin" if transport == "tcp" else f"{which}-ws-builtin"
    return f"{which}-{transport}-builtin"


def measure_udp(s: Setup, new: int, reuse: int, warmup: int) -> dict:
    """Datagram round trips to the [[udp_target]] echo (bench/udp_rtt.py): direct, and through
    each server's v2ray SOCKS5-UDP client (VLESS command 2 over TLS) and mux client (a Mux.Cool UDP
    sub-connection), interleaved at random per round."""
    paths = {"direct": None, "ours-udp": s.ours_socks, "v2ray-udp": s.v2_socks}
    # A server whose mux client cannot carry even one request gets no UDP-over-mux figure either.
    mux_errors = {w: s.probe_mux(w) for w in ("ours", "v2ray")}
    for which, port in (("ours", s.ours_mux_socks), ("v2ray", s.v2_mux_socks)):
        if mux_errors[which] is None:
            paths[f"{which}-mux-udp"] = port
    res = udp_rtt.measure(paths, s.udp_port, new, reuse, warmup)
    # The runner's own client (issue 12, acceptance 3): VLESS command 2 over TLS from the built-in
    # client to each server, udp:// target, interleaved with direct (its "new" is a new connection,
    # TLS handshake and command-2 session + the first datagram).
    # Issue 26: the same against Xray's and sing-box's raw TLS listener (both take command 2).
    res["builtin"] = run_runner(s, f"udp://{HOST}:{s.udp_port}",
                                ["direct=direct", f"ours-builtin-udp={s.link('ours')}",
                                 f"v2ray-builtin-udp={s.link('v2ray')}",
                                 *[f"{w}-builtin-udp={s.peer_link(w, 'tcp')}" for w in ("xray", "sing-box")
                                   if w in s.others]], new, reuse, warmup, s.work / "udp-builtin")
    for which, err in mux_errors.items():
        if err is not None:
            res["paths"][f"{which}-mux-udp"] = {"error": f"not measured: the mux probe failed: {err}"}
    res["table"] = udp_rtt.format_table(res)
    # Packets/s: 16 datagrams in flight on one flow for 2 s, ours and v2ray's alternately, twice.
    rate: dict = {}
    for rnd in range(2):
        for name in ("direct", "ours-udp", "v2ray-udp") if rnd == 0 else ("direct", "v2ray-udp", "ours-udp"):
            s.check_alive()
            pid = {"ours-udp": s.ours.pid, "v2ray-udp": s.v2.pid}.get(name)
            c0 = h.cpu_seconds(pid) if pid else 0.0
            try:
                j = udp_rtt.packets_per_second(s.udp_port, paths[name], 2.0)
            except OSError as e:
                rate.setdefault(name, []).append({"error": f"{type(e).__name__}: {e}"})
                continue
            if pid:
                used = h.cpu_seconds(pid) - c0
                j["server_cpu_share"] = used / j["seconds"]
                j["server_cpu_us_per_echo"] = used * 1e6 / max(j["echoes"], 1)
            rate.setdefault(name, []).append(j)
            time.sleep(0.3)
    res["rate"] = {}
    for name, runs in rate.items():
        bad = [r["error"] for r in runs if "error" in r]
        res["rate"][name] = {"error": bad[0]} if bad else {
            "per_second": statistics.median(r["per_second"] for r in runs), "runs": runs,
            "lost": sum(r["lost"] for r in runs)}
        if not bad and name != "direct":
            res["rate"][name]["server_cpu_us_per_echo"] = statistics.median(r["server_cpu_us_per_echo"] for r in runs)
    return res


def measure_mux_bulk(s: Setup, load: Path, total: int, rounds: int = 1) -> dict:
    """total bytes down (/bytes/N) and up (POST /sink) through one mux sub-connection, rounds
    times (order alternated): the load generator CONNECTs through the mux client's http inbound
    (--http-proxy). The v2ray client (same binary for every server) is in the path and takes its
    own share of the CPU. Each entry: the median round's figures, every round's MB/s in "rounds"."""
    runs: dict = {}
    servers = ["ours", "v2ray", *(["xray"] if "xray" in s.others else [])]  # issue 26: Xray's Mux.Cool too
    cpu = {w: [0.0, 0] for w in servers}
    for rnd in range(rounds):
        for mode in ("down", "up"):
            key = f"mux-{mode}x1"
            for which in servers if rnd % 2 == 0 else reversed(servers):
                s.check_alive()
                err = s.probe_mux(which)
                if err is not None:
                    runs.setdefault(key, {}).setdefault(which, []).append({"error": err})
                    continue
                pid = s.server(which)[1].pid
                port = {"ours": s.ours_mux_http, "v2ray": s.v2_mux_http, "xray": s.xray_mux_http}[which]
                client_pid = s.mux_clients[which].pid
                c0, k0 = h.cpu_seconds(pid), h.cpu_seconds(client_pid)
                g0 = os.times()
                j = run_load(load, mode, ["--target", f"{HOST}:{s.target_port}", "--http-proxy", f"{HOST}:{port}",
                                          "--workers", 1, "--threads", 1, "--bytes", total, "--seconds", 60],
                             timeout=90)
                g1 = os.times()
                client_used = h.cpu_seconds(client_pid) - k0
                load_used = (g1.children_user + g1.children_system) - (g0.children_user + g0.children_system)
                if j["failed"]:
                    runs.setdefault(key, {}).setdefault(which, []).append(
                        {"error": f"{j['failed']} failed: {j['error']}"})
                    continue
                used = h.cpu_seconds(pid) - c0
                cpu[which][0] += used
                cpu[which][1] += j["bytes"]
                runs.setdefault(key, {}).setdefault(which, []).append(
                    {"mbytes_per_second": j["mbytes_per_second"], "seconds": j["seconds"], "bytes": j["bytes"],
                     "server_cpu_share": used / j["seconds"], "mux_client_cpu_share": client_used / j["seconds"],
                     "load_cpu_share": load_used / j["seconds"]})
                time.sleep(0.5)
    res: dict = {}
    for key, per in runs.items():
        res[key] = {}
        for which, rs in per.items():
            bad = [r for r in rs if "error" in r]
            if bad:  # a failed round: no figure, its reason
                res[key][which] = bad[0]
                continue
            mid = sorted(rs, key=lambda x: x["mbytes_per_second"])[len(rs) // 2]
            res[key][which] = dict(mid, rounds=[x["mbytes_per_second"] for x in rs])
    res["mux-cpu"] = {w: {"cpu_seconds": c, "gib": b / GIB, "cpu_s_per_gib": c / (b / GIB) if b else None}
                      for w, (c, b) in cpu.items()}
    return res


def measure_xhttp(s: Setup, load: Path, counts: tuple[int, int, int], total: int, rounds: int) -> dict:
    """Issue 41: XHTTP, ours against Xray's server, Xray 25.9.11 as the client of both (bench/xhttp_side.py).
    Latency: one `vlessbench run`, direct and every (server, carrier, mode) entry interleaved at random
    (new: a new CONNECT, so a new VLESS connection and XHTTP session; reused: another request on it).
    Bulk: total bytes down and up through one connection per entry, rounds times, the server's CPU."""
    if s.xhttp is None:
        return {"error": s.missing.get("xray", "not started")}
    new, reuse, warmup = counts
    res = {"latency": run_runner(s, f"http://{HOST}:{s.target_port}/", ["direct=direct", *s.xhttp.paths()],
                                 new, reuse, warmup, s.work / "xhttp-latency", timeout=600)}
    for (w, c, m), err in s.xhttp.errors.items():
        res["latency"][f"xhttp-{w}-{c}-{m}"] = {"error": err}
    for name, p in res["latency"].items():  # a failed sample is named, with the runner's words
        for mode, m in (p.items() if isinstance(p, dict) and "error" not in p else ()):
            if isinstance(m, dict) and m.get("failed"):
                print(f"  XHTTP latency: {name} {mode}: {m['failed']} samples failed: {m.get('errors')}",
                      file=sys.stderr, flush=True)
    print("XHTTP bulk transfers...", file=sys.stderr, flush=True)
    res.update(xhttp_side.measure_bulk(s.xhttp, {"ours": s.ours.pid, "xray": s.xhttp.server.pid}, run_load, load,
                                       total, rounds))
    return res


def measure_handshakes(s: Setup, load: Path, rounds: int, seconds: float, workers: int) -> dict:
    """Closed-loop handshakes/s, and per handshake the CPU time of the server (all its threads)
    and of the load generator (the client's half, which shares the same cores)."""
    res = {w: [] for w in (*s.servers(), "direct")}
    for r in range(rounds):
        order = [*s.servers(), "direct"] if r % 2 == 0 else [*reversed(s.servers()), "direct"]
        for which in order:
            s.check_alive()
            pid = s.server(which)[1].pid if which != "direct" else s.target.pid
            c0 = h.cpu_seconds(pid)
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            j = run_load(load, "handshakes", [*s.load_args(which), "--workers", workers, "--threads", CORES,
                                              "--seconds", seconds], timeout=seconds + 30)
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            ok = max(j["ok"], 1)
            j["server_cpu_us"] = (h.cpu_seconds(pid) - c0) * 1e6 / ok
            j["client_cpu_us"] = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) * 1e6 / ok
            if j["failed"]:
                print(f"  warning: {which}: {j['failed']} failed handshakes ({j['error']})", file=sys.stderr)
            res[which].append(j)
            time.sleep(0.5)
    return {w: {"per_second": statistics.median(x["per_second"] for x in v),
                "rounds": [round(x["per_second"], 1) for x in v],
                "server_cpu_us_rounds": [x["server_cpu_us"] for x in v],
                "latency_median_us": statistics.median(x["latency_median_us"] for x in v),
                "server_cpu_us_per_handshake": statistics.median(x["server_cpu_us"] for x in v),
                "client_cpu_us_per_handshake": statistics.median(x["client_cpu_us"] for x in v)}
            for w, v in res.items()}


def measure_bulk(s: Setup, load: Path, total: int, rounds: int = 1) -> dict:
    """The four bulk cases for every server and direct, rounds times (order alternated per round
    and case); each entry holds the median round's figures and every round's MB/s in "rounds";
    "cpu" the server CPU-seconds per GiB over all runs, "cpu_rounds" per round (its four runs)."""
    cases = [("down", 1), ("up", 1), ("down", 16), ("up", 16)]
    runs: dict = {}
    cpu = {w: [0.0, 0] for w in s.servers()}  # cpu seconds, bytes
    cpu_rounds = {w: [[0.0, 0] for _ in range(rounds)] for w in s.servers()}
    for rnd in range(rounds):
        for n, (mode, sessions) in enumerate(cases):
            key = f"{mode}x{sessions}"
            order = [*s.servers(), "direct"] if (rnd + n) % 2 == 0 else [*reversed(s.servers()), "direct"]
            for which in order:
                s.check_alive()
                pid = s.server(which)[1].pid if which != "direct" else None
                c0 = h.cpu_seconds(pid) if pid else 0.0
                t0 = h.cpu_seconds(s.target.pid)
                ru = resource.getrusage(resource.RUSAGE_CHILDREN)
                j = run_load(load, mode, [*s.load_args(which), "--workers", sessions, "--threads", 1,
                                          "--bytes", total // sessions, "--seconds", 60], timeout=90)
                if j["failed"]:
                    raise RuntimeError(f"bulk {key} {which}: {j['failed']} failed: {j['error']}")
                ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                # The load generator's and the target's CPU share of the run: near 1.0 would mean the
                # measurement tool, not the server, set the pace.
                j["load_cpu_share"] = (ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime) / j["seconds"]
                j["target_cpu_share"] = (h.cpu_seconds(s.target.pid) - t0) / j["seconds"]
                if pid:
                    used = h.cpu_seconds(pid) - c0
                    j["server_cpu_share"] = used / j["seconds"]
                    for acc in (cpu[which], cpu_rounds[which][rnd]):
                        acc[0] += used
                        acc[1] += j["bytes"]
                runs.setdefault(key, {}).setdefault(which, []).append(
                    {k: j[k] for k in ("mbytes_per_second", "seconds", "bytes", "load_cpu_share",
                                       "target_cpu_share", "server_cpu_share") if k in j})
                time.sleep(0.5)
    res: dict = {}
    for key, per in runs.items():
        res[key] = {}
        for which, rs in per.items():
            mid = sorted(rs, key=lambda x: x["mbytes_per_second"])[len(rs) // 2]
            res[key][which] = dict(mid, rounds=[x["mbytes_per_second"] for x in rs])
    res["cpu_rounds"] = {w: [c / (b / GIB) for c, b in rs if b] for w, rs in cpu_rounds.items()}
    # The same single-session transfers over WebSocket (path /ws, TLS below): each server's ws
    # listener, the load generator's ws client (--ws-path; no early data, as v2ray 4.34 sends none).
    ws_cpu = {"ours": [0.0, 0], "v2ray": [0.0, 0]}
    for mode in ("down", "up"):
        key = f"ws-{mode}x1"
        res[key] = {}
        for which in ("ours", "v2ray"):
            s.check_alive()
            pid = s.server(which)[1].pid
            port = s.ours_ws_port if which == "ours" else s.v2_ws_port
            c0 = h.cpu_seconds(pid)
            j = run_load(load, mode, ["--target", f"{HOST}:{s.target_port}", "--server", f"{HOST}:{port}",
                                      "--uuid", s.uuid, "--ws-path", "/ws", "--workers", 1, "--threads", 1,
                                      "--bytes", total, "--seconds", 60], timeout=90)
            if j["failed"]:
                raise RuntimeError(f"bulk {key} {which}: {j['failed']} failed: {j['error']}")
            used = h.cpu_seconds(pid) - c0
            ws_cpu[which][0] += used
            ws_cpu[which][1] += j["bytes"]
            res[key][which] = {"mbytes_per_second": j["mbytes_per_second"], "seconds": j["seconds"],
                               "bytes": j["bytes"], "server_cpu_share": used / j["seconds"]}
            time.sleep(0.5)
    res["cpu"] = {w: {"cpu_seconds": c, "gib": b / GIB, "cpu_s_per_gib": c / (b / GIB)}
                  for w, (c, b) in cpu.items()}
    res["ws-cpu"] = {w: {"cpu_seconds": c, "gib": b / GIB, "cpu_s_per_gib": c / (b / GIB)}
                     for w, (c, b) in ws_cpu.items()}
    return res

# ---------------------------------------------------------------------------------------------
# Report


def machine() -> dict:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    v2 = subprocess.run([h.V2RAY, "-version"], capture_output=True, text=True,
                        timeout=10).stdout.splitlines()
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
            "v2ray": v2[0] if v2 else "", "python": platform.python_version()}


def peer_versions(s: Setup) -> dict:
    """The first line each server prints for its version (ours: the build under test)."""
    out = {}
    for name, args in (("xray", ["version"]), ("sing-box", ["version"]), ("haproxy", ["-v"])):
        if s.peers.get(name):
            r = subprocess.run([str(s.peers[name]), *args], capture_output=True, text=True, timeout=10)
            out[name] = (r.stdout.splitlines() or ["?"])[0].strip()
    return out


def print_pace(results: dict) -> None:
    """Who set the pace in each bulk case: the CPU share (CPU-seconds / wall seconds) of the load
    generator, the target and the server in the median round. Near 1.0 is a process that was
    saturated; on a shared machine all of them can sit well below it (they waited for a core)."""
    bulk = results.get("bulk")
    if bulk:
        print("\nwho set the pace (CPU share of a core in the bulk runs: load generator / target / server):")
        for key in ("downx1", "upx1", "downx16", "upx16"):
            parts = []
            for w, e in bulk.get(key, {}).items():
                parts.append(f"{w} {e.get('load_cpu_share', 0):.2f}/{e.get('target_cpu_share', 0):.2f}/"
                             f"{e.get('server_cpu_share', 0):.2f}" if w != "direct" else
                             f"direct {e.get('load_cpu_share', 0):.2f}/{e.get('target_cpu_share', 0):.2f}/-")
            print(f"  {key}: " + ", ".join(parts))
    mux = results.get("mux")
    if mux:
        # One v2ray mux client (the same binary) sits in front of every Mux.Cool server.
        print("who set the pace through one Mux.Cool sub (load generator / v2ray mux client / server):")
        for key in ("mux-downx1", "mux-upx1"):
            parts = [f"{w} {e['load_cpu_share']:.2f}/{e['mux_client_cpu_share']:.2f}/{e['server_cpu_share']:.2f}"
                     for w, e in mux.get(key, {}).items() if "mux_client_cpu_share" in e]
            print(f"  {key}: " + ", ".join(parts))


def table(results: dict) -> list[dict]:
    lat, hs, bulk, idle = results["latency"], results["handshakes"], results["bulk"], results["idle"]
    rows = []

    def row(metric, unit, ours, v2, target_op, target, floor=None):
        ratio = ours / v2 if v2 else float("nan")
        met = ratio <= target if target_op == "<=" else ratio >= target
        rows.append({"metric": metric, "unit": unit, "ours": ours, "v2ray": v2, "ratio": ratio,
                     "target": f"{target_op} {target}", "met": met, "direct_floor": floor})

    for data, client, suffix in ((lat, "built-in client", "builtin"), (lat, "v2ray client", "v2client"),
                                 (lat, "WebSocket, built-in client", "ws-builtin"),
                                 (lat, "WebSocket, v2ray client", "ws-v2client")):
        for mode, label, tgt in (("new", "new-connection added latency", 0.75),
                                 ("reuse", "reused added latency", 0.5)):
            # WebSocket rows (issue 13): ours no slower than v2ray's, ratio <= 1.
            row(f"{label} ({client})", "ms", data[f"ours-{suffix}"][mode]["paired_delta_median_ms"],
                data[f"v2ray-{suffix}"][mode]["paired_delta_median_ms"], "<=", 1.0 if "ws" in suffix else tgt,
                data["direct"][mode]["median_ms"])
    # Not a comparison: what a plain relay adds (socat forks per connection, so its new-connection
    # figure includes a fork and is no floor; its reused figure is).
    for mode, label in (("new", "new-connection added latency, plain relay (socat)"),
                        ("reuse", "reused added latency, plain relay (socat): the floor")):
        rows.append({"metric": label, "unit": "ms", "ours": lat["relay-floor"][mode]["paired_delta_median_ms"],
                     "v2ray": None, "ratio": None, "target": "(floor)", "met": None,
                     "direct_floor": lat["direct"][mode]["median_ms"]})
    row("handshakes/s (TLS+VLESS+GET)", "1/s", hs["ours"]["per_second"], hs["v2ray"]["per_second"], ">=", 1.5,
        hs["direct"]["per_second"])
    # Not a target: what one handshake costs the server and (same for both) the load generator.
    row("server CPU per handshake", "us", hs["ours"]["server_cpu_us_per_handshake"],
        hs["v2ray"]["server_cpu_us_per_handshake"], "<=", 1.0)
    rows[-1]["target"], rows[-1]["met"] = "(none)", None
    rows.append({"metric": "load generator CPU per handshake (ours / v2ray runs)", "unit": "us",
                 "ours": hs["ours"]["client_cpu_us_per_handshake"], "v2ray": hs["v2ray"]["client_cpu_us_per_handshake"],
                 "ratio": None, "target": "(none)", "met": None, "direct_floor": None})
    for key, label, tgt in (("downx1", "download, 1 session", 2.0), ("upx1", "upload, 1 session", 2.0),
                            ("downx16", "download, 16 sessions", None), ("upx16", "upload, 16 sessions", None)):
        b = bulk[key]
        row(label, "MB/s", b["ours"]["mbytes_per_second"], b["v2ray"]["mbytes_per_second"], ">=", tgt or 1.0,
            b["direct"]["mbytes_per_second"])
        if tgt is None:
            rows[-1]["target"] = "(none)"
            rows[-1]["met"] = None
    row("RSS per idle session", "KiB", idle["ours"]["per_session_kib"], idle["v2ray"]["per_session_kib"], "<=", 0.5)
    row("CPU-seconds per GiB relayed", "s/GiB", bulk["cpu"]["ours"]["cpu_s_per_gib"],
        bulk["cpu"]["v2ray"]["cpu_s_per_gib"], "<=", 0.5)
    # WebSocket (issue 13): ours no worse than v2ray's ws server, ratio <= 1 / >= 1.
    for key, label in (("ws-downx1", "WebSocket download, 1 session"), ("ws-upx1", "WebSocket upload, 1 session")):
        b = bulk[key]
        row(label, "MB/s", b["ours"]["mbytes_per_second"], b["v2ray"]["mbytes_per_second"], ">=", 1.0, None)
    row("WebSocket CPU-seconds per GiB relayed", "s/GiB", bulk["ws-cpu"]["ours"]["cpu_s_per_gib"],
        bulk["ws-cpu"]["v2ray"]["cpu_s_per_gib"], "<=", 1.0)
    return rows


def issue12_rows(results: dict) -> list[dict]:
    """UDP round trip and Mux.Cool rows (issue 12), for the phases that ran. No target: these
    compare. A server that failed a path gets "FAILED" and the reason, never a figure."""
    rows = []

    def row(metric, unit, cell_ours, cell_v2, floor=None, ci=False):
        def value(c):
            if c is None or "error" in c:
                return "FAILED", (c or {}).get("error", "not measured")
            v = c["value"]
            note = []
            if ci and c.get("ci") and c["ci"][0] is not None:
                note.append(f"95% CI [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]")
            if c.get("failed"):
                note.append(f"{c['failed']} samples failed")
            return v, ", ".join(note) or None
        o, o_note = value(cell_ours)
        v, v_note = value(cell_v2)
        ratio = o / v if isinstance(o, float) and isinstance(v, float) and v else None
        notes = [f"{w}: {n}" for w, n in (("ours", o_note), ("v2ray", v_note)) if n]
        rows.append({"metric": metric, "unit": unit, "ours": o, "v2ray": v, "ratio": ratio, "target": "(none)",
                     "met": None, "direct_floor": floor, "notes": notes})

    def delta(p, mode):
        # A path that failed (or was abandoned part-way) gets no figure, only its reason.
        if p is None or "error" in p:
            return {"error": (p or {}).get("error", "not measured")}
        m = p[mode]
        if m.get("paired_delta_median_ms") is None:
            return {"error": f"{m.get('failed')} of {m.get('n', 0) + (m.get('failed') or 0)} samples failed"}
        return {"value": m["paired_delta_median_ms"], "failed": m.get("failed"),
                "ci": (m.get("paired_delta_ci_low_ms"), m.get("paired_delta_ci_high_ms"))}

    def p95(p, mode):
        if p is None or "error" in p or p[mode].get("p95_ms") is None:
            return {"error": (p or {}).get("error", "not measured")}
        return {"value": p[mode]["p95_ms"]}

    if "udp" in results:
        u = results["udp"]["paths"]
        d = u["direct"]
        for suffix, label in (("udp", "VLESS cmd 2, v2ray SOCKS5 client"), ("mux-udp", "Mux.Cool UDP, v2ray mux client")):
            for mode, what in (("new", "new flow + first datagram"), ("reuse", "datagram on a kept flow")):
                row(f"UDP round trip added, {what} ({label})", "ms", delta(u.get(f"ours-{suffix}"), mode),
                    delta(u.get(f"v2ray-{suffix}"), mode), d[mode]["median_ms"], ci=True)
                row(f"UDP round trip P95, {what} ({label})", "ms", p95(u.get(f"ours-{suffix}"), mode),
                    p95(u.get(f"v2ray-{suffix}"), mode), d[mode]["p95_ms"])
        r = results["udp"].get("rate", {})

        def rate(p, key="per_second"):
            if p is None or "error" in p:
                return {"error": (p or {}).get("error", "not measured")}
            return {"value": float(p[key])}
        b = results["udp"].get("builtin")
        if b:
            for mode, what in (("new", "new flow + first datagram"), ("reuse", "datagram on a kept flow")):
                row(f"UDP round trip added, {what} (built-in client, VLESS cmd 2)", "ms",
                    delta(b.get("ours-builtin-udp"), mode), delta(b.get("v2ray-builtin-udp"), mode),
                    b["direct"][mode]["median_ms"], ci=True)
                row(f"UDP round trip P95, {what} (built-in client, VLESS cmd 2)", "ms",
                    p95(b.get("ours-builtin-udp"), mode), p95(b.get("v2ray-builtin-udp"), mode),
                    b["direct"][mode]["p95_ms"])
        # The v2ray client (the same for both servers) is in the path: the server CPU per datagram
        # (its process, over both rounds' echoes: one datagram each way) compares the servers.
        row("UDP packets/s, 16 in flight on one flow (VLESS cmd 2, v2ray SOCKS5 client)", "1/s",
            rate(r.get("ours-udp")), rate(r.get("v2ray-udp")), (r.get("direct") or {}).get("per_second"))
        row("server CPU per UDP round trip, in the packets/s run", "us", rate(r.get("ours-udp"), "server_cpu_us_per_echo"),
            rate(r.get("v2ray-udp"), "server_cpu_us_per_echo"))
    if "latency" in results:
        lat = results["latency"]
        for mode, label in (("new", "new-sub-connection added latency"), ("reuse", "reused added latency")):
            row(f"{label} (v2ray client, Mux.Cool)", "ms", delta(lat.get("ours-mux-v2client"), mode),
                delta(lat.get("v2ray-mux-v2client"), mode), lat["direct"][mode]["median_ms"], ci=True)
    if "mux" in results:
        m = results["mux"]
        for key, label in (("mux-downx1", "download, 1 mux sub-connection"), ("mux-upx1", "upload, 1 mux sub-connection")):
            cell = {w: ({"value": float(c["mbytes_per_second"])} if "error" not in c else c)
                    for w, c in m[key].items()}
            row(label, "MB/s", cell["ours"], cell["v2ray"])
        cell = {w: ({"value": c["cpu_s_per_gib"]} if c["cpu_s_per_gib"] is not None else
                    {"error": m["mux-downx1"][w].get("error", "no bytes relayed")})
                for w, c in m["mux-cpu"].items()}
        row("server CPU-seconds per GiB relayed over Mux.Cool", "s/GiB", cell["ours"], cell["v2ray"])
    return rows


# Two-sided 95 % Student t quantiles by degrees of freedom (rounds - 1), for the rows measured in
# rounds (handshakes/s, bulk, CPU per GiB, RSS): few rounds give wide intervals, and say so.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_ci(values: list[float]) -> dict:
    """Mean of rounds with its 95 % t interval; one value has no interval."""
    if not values:
        return {"error": "not measured"}
    m = statistics.fmean(values)
    if len(values) < 2:
        return {"value": m, "ci": None, "n": 1}
    half = _T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / len(values) ** 0.5
    return {"value": m, "ci": (m - half, m + half), "n": len(values)}


SERVERS = ("ours", "v2ray", "xray", "sing-box", "haproxy")


def side_by_side_rows(results: dict, s: Setup) -> list[dict]:
    """Issue 26: one row per metric, one cell per server (ours, v2ray 4.34, Xray, sing-box, the
    HAProxy floor), each with its 95 % CI: the runner's bootstrap interval of the paired median for
    latency, the t interval over rounds for the rest. A cell that does not apply says why."""
    why_not = s.missing
    rows = []

    def add(metric, unit, cells, better):
        ours = cells.get("ours", {}).get("value")
        ratio = {f"ours/{w}": (ours / cells[w]["value"] if ours is not None and cells.get(w, {}).get("value")
                               else None) for w in ("xray", "haproxy")}
        rows.append({"metric": metric, "unit": unit, "cells": cells, "better": better, **ratio})

    def paired(p, mode, why):
        """A latency cell: the path's paired median and bootstrap CI, or why it has none."""
        if p is None or "error" in p or p[mode].get("paired_delta_median_ms") is None:
            return {"error": why or (p or {}).get("error") or "not measured"}
        m = p[mode]
        return {"value": m["paired_delta_median_ms"], "ci": (m["paired_delta_ci_low_ms"], m["paired_delta_ci_high_ms"])}

    # Rows only for the phases that ran (--only).
    lat = results.get("latency", {})
    for transport, label in (("tcp", "raw TLS"), ("ws", "WebSocket"), ("httpupgrade", "HTTPUpgrade"),
                             ("grpc", "gRPC"), ("vision", "raw TLS + Vision"), ("mux", "Mux.Cool sub")) if lat else ():
        for mode, what in (("new", "new-connection added"), ("reuse", "reused added")):
            cells = {}
            for w in SERVERS:
                if w == "haproxy" and transport != "tcp":
                    cells[w] = {"error": "n/a (a bare TLS floor)"}
                    continue
                if w == "v2ray" and transport in ("httpupgrade", "grpc", "vision"):
                    cells[w] = {"error": "none in v2ray 4.34"}
                    continue
                if w == "sing-box" and transport == "mux":
                    cells[w] = {"error": "no Mux.Cool (sing-mux only)"}
                    continue
                cells[w] = paired(lat.get(lat_path(w, transport)), mode, why_not.get(w))
            add(f"{what} latency, {label} (built-in client{', tls:// for haproxy' if transport == 'tcp' else ''})",
                "ms", cells, "lower")
    for client, vision in (("xray", False), ("sing-box", False), ("xray", True), ("sing-box", True)) if lat else ():
        for mode, what in (("new", "new-connection added"), ("reuse", "reused added")):
            cells = {}
            for w in SERVERS:
                if w == "haproxy":
                    cells[w] = {"error": "n/a (a bare TLS floor)"}
                elif w == "v2ray" and vision:
                    cells[w] = {"error": "none in v2ray 4.34"}
                else:
                    cells[w] = paired(lat.get(f"{client}client-{w}{'-vision' if vision else ''}"), mode,
                                      why_not.get(client) or why_not.get(w))
            add(f"{what} latency, raw TLS{' + Vision' if vision else ''} "
                f"({'Xray' if client == 'xray' else 'sing-box'}'s client, CONNECT)", "ms", cells, "lower")
    udp = results.get("udp", {}).get("builtin", {})
    for mode, what in (("new", "new flow + first datagram"), ("reuse", "datagram on a kept flow")) if udp else ():
        cells = {}
        for w in SERVERS:
            cells[w] = ({"error": "n/a (TCP only)"} if w == "haproxy" else
                        paired(udp.get(f"{w}-builtin-udp"), mode, why_not.get(w)))
        add(f"UDP round trip added, {what} (built-in client, command 2)", "ms", cells, "lower")

    xhttp_rows(results.get("xhttp", {}), why_not, paired, add)

    def per_server(source, pick, metric, unit, better):
        if not source:
            return
        cells = {}
        for w in SERVERS:
            entry = source.get(w)
            cells[w] = mean_ci(pick(entry)) if entry else {"error": why_not.get(w) or "not measured"}
        add(metric, unit, cells, better)

    hs = results.get("handshakes", {})
    per_server(hs, lambda e: e["rounds"], "handshakes/s (TLS 1.3 + VLESS or bare TLS + GET)", "1/s", "higher")
    per_server(hs, lambda e: e["server_cpu_us_rounds"], "server CPU per handshake", "us", "lower")
    bulk = results.get("bulk", {})
    for key, label in (("downx1", "download, 1 session"), ("upx1", "upload, 1 session"),
                       ("downx16", "download, 16 sessions"), ("upx16", "upload, 16 sessions")):
        per_server(bulk.get(key, {}), lambda e: e["rounds"], label, "MB/s", "higher")
    per_server(bulk.get("cpu_rounds", {}), lambda e: e, "server CPU-seconds per GiB (the four bulk runs)", "s/GiB",
               "lower")
    per_server(results.get("idle", {}), lambda e: e["rounds"], "RSS per idle session", "KiB", "lower")
    mux = results.get("mux", {})
    for key, label in (("mux-downx1", "download, 1 Mux.Cool sub (v2ray mux client)"),
                       ("mux-upx1", "upload, 1 Mux.Cool sub (v2ray mux client)")) if mux else ():
        cells = {}
        for w in SERVERS:
            c = mux.get(key, {}).get(w)
            if w in ("sing-box", "haproxy"):
                cells[w] = {"error": "no Mux.Cool"}
            elif c is None or "error" in c:
                cells[w] = {"error": why_not.get(w) or (c or {}).get("error") or "not measured"}
            else:
                cells[w] = mean_ci(c["rounds"])
        add(label, "MB/s", cells, "higher")
    return rows


def xhttp_rows(x: dict, why_not: dict, paired, add) -> None:
    """Issue 41: per carrier and mode, ours' and Xray's XHTTP server through the same Xray client:
    new and reused added latency, download and upload MB/s (mean of rounds), server CPU-seconds per
    GiB. The other servers have no XHTTP: their cells say so ("na": the tables leave out a column
    of such cells only)."""
    if not x:
        return
    none = {"v2ray": "no XHTTP in v2ray 4.34", "sing-box": "no XHTTP in sing-box 1.11",
            "haproxy": "n/a (a bare TLS floor)"}

    def cells(one):
        out = {w: {"error": why, "na": True} for w, why in none.items()}
        for w in xhttp_side.SERVERS:
            out[w] = {"error": x["error"]} if "error" in x else one(w)
        return out

    def rounds_cell(per, w, pick):
        rs = (per or {}).get(w) or []
        bad = [r for r in rs if r is None or "error" in r]
        if not rs or bad:
            return {"error": (bad[0] or {}).get("error", "no bytes relayed") if bad else why_not.get(w, "not measured")}
        return mean_ci([pick(r) for r in rs])

    lat, bulk, cpu = x.get("latency", {}), x.get("bulk", {}), x.get("cpu", {})
    for carrier, label in xhttp_side.CARRIERS.items():
        for mode in xhttp_side.MODES:
            for m, what in (("new", "new-connection added"), ("reuse", "reused added")) if lat else ():
                add(f"{what} latency, XHTTP {mode}, {label} (Xray's client, CONNECT)", "ms",
                    cells(lambda w: paired(lat.get(f"xhttp-{w}-{carrier}-{mode}"), m, why_not.get(w))), "lower")
            for direction in ("down", "up") if bulk else ():
                add(f"XHTTP {mode} {direction}load, 1 connection, {label} (Xray's client)", "MB/s",
                    cells(lambda w: rounds_cell(bulk.get(f"{carrier}-{mode}-{direction}"), w,
                                                lambda r: r["mbytes_per_second"])), "higher")
            if cpu:
                add(f"server CPU-seconds per GiB, XHTTP {mode}, {label} (its download and upload)", "s/GiB",
                    cells(lambda w: rounds_cell({k: [{"v": v} if v is not None else None for v in rs]
                                                 for k, rs in cpu.get(f"{carrier}-{mode}", {}).items()}, w,
                                                lambda r: r["v"])), "lower")


def shown_servers(rows: list[dict]) -> list[str]:
    """The servers a table shows: all but one whose every cell is "na" (e.g. an --only xhttp run)."""
    return [w for w in SERVERS if not rows or not all(r["cells"][w].get("na") for r in rows)]


def print_side_by_side(rows: list[dict]) -> None:
    def cell(c):
        if "error" in c:
            return "-"
        v = fmt(float(c["value"]))
        return v + (f" [{fmt(float(c['ci'][0]))}, {fmt(float(c['ci'][1]))}]" if c.get("ci") else " (1 run)")
    shown = shown_servers(rows)
    ratios = ["ours/xray", *(["ours/haproxy"] if "haproxy" in shown else [])]
    head = ["metric", "unit", "better", *shown, *ratios]
    body = [[r["metric"], r["unit"], r["better"], *[cell(r["cells"][w]) for w in shown], *[fmt(r[q]) for q in ratios]]
            for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for i, line in enumerate([head, *body]):
        print("  ".join(c.ljust(widths[k]) if k < 3 else c.rjust(widths[k]) for k, c in enumerate(line)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    notes = sorted({f"{w}: {r['cells'][w]['error']}" for r in rows for w in SERVERS
                    if r["cells"][w].get("error", "not measured") != "not measured"})
    print("cells '-': " + "; ".join(notes))
    for r in rows:
        failed = [w for w in SERVERS if r["cells"][w].get("error") == "not measured" and
                  any("value" in c for c in r["cells"].values())]
        if failed:
            print(f"  {r['metric']}: no figure for {', '.join(failed)} (see the run's own table)")


def side_by_side_markdown(results: dict) -> str:
    """The side-by-side table as docs/performance.md holds it, with what the run was and the
    machine's load: the doc's figures are pasted from this, never typed."""
    m = results["machine"]

    def cell(c):
        if "error" in c:
            return "— " + c["error"] if c["error"] != "not measured" else "FAILED (see the run's table)"
        v = fmt(float(c["value"]))
        return f"{v} [{fmt(float(c['ci'][0]))}, {fmt(float(c['ci'][1]))}]" if c.get("ci") else f"{v} (1 run)"
    v = results["servers"]["versions"]
    shown = shown_servers(results["side_by_side"])
    ratios = ["ours/xray", *(["ours/haproxy"] if "haproxy" in shown else [])]
    lines = [f"`{results['command']}` ({results['started']}, {results['seconds']} s; load average "
             f"{' '.join(m['loadavg_at_start'])} at the start, {' '.join(m['loadavg_at_end'])} at the end; "
             f"{m['nproc']} cores; {', '.join(f'{w}: {x}' for w, x in v.items())}; missing: "
             f"{', '.join(results['servers']['missing']) or 'none'}):", "",
             "| metric | unit | better | " + " | ".join(shown + ratios) + " |",
             "|---" * (3 + len(shown) + len(ratios)) + "|"]
    for r in results["side_by_side"]:
        lines.append(f"| {r['metric']} | {r['unit']} | {r['better']} | "
                     + " | ".join([cell(r["cells"][w]) for w in shown] + [fmt(r[q]) for q in ratios]) + " |")
    return "\n".join(lines) + "\n"


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def print_table(rows: list[dict]) -> None:
    head = ["metric", "unit", "ours", "v2ray", "ratio", "target", "met?", "direct floor"]
    body = [[r["metric"], r["unit"], fmt(r["ours"]), fmt(r["v2ray"]), fmt(r["ratio"]), r["target"],
             fmt(r["met"]), fmt(r["direct_floor"])] for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for i, line in enumerate([head, *body]):
        print("  ".join(c.ljust(widths[k]) if k < 2 else c.rjust(widths[k]) for k, c in enumerate(line)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        for note in r.get("notes") or []:
            print(f"  {r['metric']}: {note}")


def main() -> int:
    try:
        return run()
    finally:
        h.stop_all()  # the servers run until the end; quietly, unlike a test's leftovers


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=Path, default=Path(os.environ.get("VLESSBENCH_BIN") or REPO / "build" / "bin"),
                    help="directory with vlessbenchd, vlessbench, vlessbench_load")
    ap.add_argument("--out", type=Path, default=Path("bench-result.json"))
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke test, not for the docs)")
    ap.add_argument("--markdown", type=Path, help="also write the side-by-side table as docs/performance.md holds it")
    ap.add_argument("--only", default="idle,latency,handshakes,bulk,udp,mux,xhttp",
                    help="comma list of phases to run (udp: datagram round trips; mux: bulk through Mux.Cool; "
                         "the Mux.Cool latency paths run in the latency phase; xhttp: ours and Xray's XHTTP "
                         "server through Xray's client, latency and bulk)")
    ap.add_argument("--threads", type=int, default=1,
                    help="our server's [limits] threads (default 1, the daemon's default: on two cores shared "
                         "with the load generator it beat 2, see docs/performance.md)")
    a = ap.parse_args()
    load = a.bin / "vlessbench_load"
    for b in (a.bin / "vlessbenchd", a.bin / "vlessbench", load):
        if not b.exists():
            print(f"missing {b}: build with ninja -C BUILD vlessbenchd vlessbench vlessbench_load", file=sys.stderr)
            return 2
    quick = a.quick
    phases = set(a.only.split(","))
    work = h.tempdir("vlessbench-bench-")
    t0 = time.monotonic()
    results: dict = {"machine": machine(), "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    results["ours_threads"] = a.threads
    s = Setup(a.bin, work, a.threads)
    # Warm-up: a few sessions through each path so that lazy initialisation is paid before measuring.
    for which in s.servers():
        run_load(load, "handshakes", [*s.load_args(which), "--workers", 2, "--seconds", 0.5], timeout=30)

    results["crypto"] = measure_crypto(load)
    if "idle" in phases:
        print("idle sessions (RSS)...", file=sys.stderr, flush=True)
        # 1,000 sessions even with --quick: with 200 a Go server's own RSS swings (its GC) outweighed
        # the sessions (negative figures in a quick run).
        results["idle"] = measure_idle(s, load, 1000, rounds=2 if quick else 3)
    if "latency" in phases:
        print("latency (vlessbench run)...", file=sys.stderr, flush=True)
        results["latency"] = measure_latency(s, *((30, 60, 5) if quick else (150, 300, 10)))
    if "handshakes" in phases:
        print("handshakes/s...", file=sys.stderr, flush=True)
        results["handshakes"] = measure_handshakes(s, load, 3, 2 if quick else 5, 16)
    if "bulk" in phases:
        print("bulk transfers...", file=sys.stderr, flush=True)
        results["bulk"] = measure_bulk(s, load, (GIB // 8) if quick else GIB, rounds=2 if quick else 3)
    if "udp" in phases:
        print("UDP round trips (SOCKS5 UDP through v2ray clients)...", file=sys.stderr, flush=True)
        results["udp"] = measure_udp(s, *((30, 60, 5) if quick else (150, 300, 10)))
    if "mux" in phases:
        print("bulk through Mux.Cool...", file=sys.stderr, flush=True)
        results["mux"] = measure_mux_bulk(s, load, (GIB // 32) if quick else GIB // 4, rounds=2 if quick else 3)
    if "xhttp" in phases:
        print("XHTTP, ours and Xray's server through Xray's client (latency)...", file=sys.stderr, flush=True)
        s.start_xhttp()  # here, so that its two Xray processes are not beside the other phases
        results["xhttp"] = measure_xhttp(s, load, (30, 60, 5) if quick else (150, 300, 10),
                                         (GIB // 32) if quick else GIB // 4, rounds=2 if quick else 3)
    s.check_alive()
    results["seconds"] = round(time.monotonic() - t0, 1)
    results["machine"]["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    results["servers"] = {"running": s.servers(), "missing": s.missing, "versions": peer_versions(s)}
    rows = table(results) if phases >= {"idle", "latency", "handshakes", "bulk"} else []
    rows += issue12_rows(results)
    if rows:
        results["table"] = rows
        print_table(rows)
    side = side_by_side_rows(results, s)
    results["side_by_side"] = side
    print("\nside by side (issue 26): figure [95% CI]; servers: "
          + ", ".join(f"{w} {v}" for w, v in results["servers"]["versions"].items()))
    print_side_by_side(side)
    print_pace(results)
    if "bulk" in results.get("xhttp", {}):
        xhttp_side.print_pace(results["xhttp"])
    if "latency" in results.get("xhttp", {}):
        print("\nXHTTP latency run (vlessbench run through Xray's client):\n" + results["xhttp"]["latency"]["table"])
    if "latency" in results:
        print("\nlatency run (vlessbench run):\n" + results["latency"]["table"])
    if "udp" in results:
        u = results["udp"]
        cpu = u["client_cpu_us_per_datagram"]
        print(f"\nUDP round trips ({u['size']}-byte datagrams; this Python client's CPU per datagram "
              f"{'-' if cpu is None else f'{cpu:.1f}'} us):\n" + u["table"])
        if "builtin" in u:
            print("\nUDP round trips, the runner's built-in client (vlessbench run, udp://):\n" + u["builtin"]["table"])
    c = results["crypto"]
    print("\nhandshake crypto, us per operation (BoringSSL linked / OpenSSL 3 `openssl speed`): "
          f"ECDSA P-256 sign {c['boringssl']['ecdsa_p256_sign_us']} / {c['openssl3'].get('ecdsa_p256_sign_us')}, "
          f"verify {c['boringssl']['ecdsa_p256_verify_us']} / {c['openssl3'].get('ecdsa_p256_verify_us')}, "
          f"X25519 key pair {c['boringssl']['x25519_keypair_us']} and shared secret "
          f"{c['boringssl']['x25519_shared_us']} / {c['openssl3'].get('x25519_op_us')}")
    a.out.write_text(json.dumps(results, indent=1))
    if a.markdown:
        a.markdown.write_text(side_by_side_markdown(results))
    print(f"\n{a.out} written; {results['seconds']} s; load average at start "
          f"{' '.join(results['machine']['loadavg_at_start'])}, at end {' '.join(results['machine']['loadavg_at_end'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
