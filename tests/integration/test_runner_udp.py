"""The runner's udp:// and dns:// targets (issue 12) against the real daemon's [[udp_target]] echo
and [[dns]] responder: paths direct, the built-in VLESS client's UDP command over TLS and over
WebSocket, and the real v2ray 4.34 client's SOCKS5 UDP ASSOCIATE -> its VLESS outbound. Every
sample's route is checked (the echo's trailer, the DNS answer's route TXT record), `vlessbench
verify` against the daemon's udp.packet / dns.query lines, a proxy path that is really direct
(v2ray's freedom outbound) is a route mismatch, and path kinds that cannot carry UDP are usage
errors.
"""
import csv
import json
import socket
import subprocess
import time

from harness import (ANY_PORT, CLIENT_BIN, BIN, LOOPBACK, Daemon, Suite, TlsClient, V2ray, check, free_port, read_udp_frame,
                     read_vless_response_header, require_binary, tempdir, echo_datagram, udp_echo_trailer, udp_frame, v2ray_socks_inbound,
                     v2ray_vless_outbound, verify_log, vless_header)

suite = Suite("test_runner_udp")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
UUID = "5f0e1d2c-3b4a-4c5d-8e6f-778899aabbcc"


# Flows idle for 400 ms are logged (udp.packet) and forgotten: verify can run soon after a run.
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "tls", "listen": ANY_PORT},
              {"name": "ws", "listen": ANY_PORT, "transport": "ws", "path": "/ws"},
              {"name": "up", "listen": ANY_PORT, "transport": "httpupgrade", "path": "/up"},
              {"name": "grpc", "listen": ANY_PORT, "transport": "grpc"}],
    "target": [{"name": "http", "listen": ANY_PORT}],
    "udp_target": [{"name": "udp", "listen": ANY_PORT},
                   {"name": "ntp", "listen": ANY_PORT, "mode": "ntp"},
                   {"name": "stun", "listen": ANY_PORT, "mode": "stun"}],
    "dns": [{"name": "dns", "listen": ANY_PORT}],
}, limits={"udp_idle_timeout_ms": 400})
UDP_PORT = D.port("udp")
DNS_PORT = D.port("dns")  # TCP and UDP
LINK_TLS = (f"vless://{UUID}@{LOOPBACK}:{D.port('tls')}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#tls")
LINK_WS = (f"vless://{UUID}@{LOOPBACK}:{D.port('ws')}?encryption=none&security=tls&sni=localhost"
           f"&allowInsecure=1&type=ws&path=%2Fws#ws")
LINK_UP = (f"vless://{UUID}@{LOOPBACK}:{D.port('up')}?encryption=none&security=tls&sni=localhost"
           f"&allowInsecure=1&type=httpupgrade&path=%2Fup#up")
LINK_GRPC = (f"vless://{UUID}@{LOOPBACK}:{D.port('grpc')}?encryption=none&security=tls&sni=localhost"
             f"&allowInsecure=1&type=grpc#grpc")
SOCKS_VLESS = free_port(proto="tcp+udp")
SOCKS_FREE = free_port(proto="tcp+udp")
# v2ray 4.34: a SOCKS5 inbound with UDP -> VLESS+TLS to the daemon, and one -> freedom (direct).
V2 = V2ray({
    "log": {"loglevel": "warning"},
    "inbounds": [v2ray_socks_inbound(SOCKS_VLESS, tag="via-vless"), v2ray_socks_inbound(SOCKS_FREE, tag="via-freedom")],
    "outbounds": [
        v2ray_vless_outbound(D.port("tls"), UUID, tag="vless"),
        {"tag": "free", "protocol": "freedom", "settings": {}},
    ],
    "routing": {"rules": [{"type": "field", "inboundTag": ["via-vless"], "outboundTag": "vless"},
                          {"type": "field", "inboundTag": ["via-freedom"], "outboundTag": "free"}]},
}, SOCKS_VLESS)
PATHS = [f"vl-tls={LINK_TLS}", f"vl-ws={LINK_WS}", f"v2ray=socks5://{LOOPBACK}:{SOCKS_VLESS}"]
UDP_TARGET = f"udp://{LOOPBACK}:{UDP_PORT}"
DNS_TARGET = f"dns://{LOOPBACK}:{DNS_PORT}/host.vlessbench.test"


def runner(*args, timeout=60):
    return subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def run(target, paths=PATHS, new=4, reuse=6, expect_rc=0, extra=()):
    out = tempdir("vlessbench-udp-")
    argv = ["run", "--target", target, "--new", new, "--reuse", reuse, "--warmup", 1, "--out", out,
            "--seed", 5, "--timeout", 3, *extra]
    for p in paths:
        argv += ["--path", p]
    r = runner(*argv)
    check(r.returncode == expect_rc, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    summary = json.loads((out / "summary.json").read_text())
    check((out / "report.svg").stat().st_size > 0)
    return out, r.stdout, rows, summary


def verify(out, want_ok=True):
    """udp.packet lines are written once a flow idles (400 ms here): retried, bounded."""
    return verify_log(RUNNER, D.access, out, want_ok=want_ok)


TRANSPORT = {"vl-ws": "ws", "vl-up": "httpupgrade", "vl-grpc": "grpc"}


def routes_right(rows):
    check(all(s["ok"] == "1" for s in rows), [s for s in rows if s["ok"] != "1"][:3])
    for s in rows:
        if s["path"] == "direct":
            check(s["route"] == "direct" and s["session"] == "" and s["flow"].startswith(f"{LOOPBACK}:"), s)
        else:
            check(s["flow"] == "", s)
            check(s["route"] == "vless" and s["session"] and s["user"] == "alice", s)
            check(s["transport"] == TRANSPORT.get(s["path"], "tls"), s)
        check(s["route_mismatch"] == "0", s)


def flows_right(rows, paths=("vl-tls", "vl-ws", "v2ray")):
    """new = a new flow (its own VLESS session) per sample; reuse = one session for the path."""
    for path in paths:
        fresh = [s["session"] for s in rows if s["path"] == path and s["mode"] == "new"]
        check(len(fresh) == 4 and len(set(fresh)) == 4, (path, fresh))
        reused = {s["session"] for s in rows if s["path"] == path and s["mode"] == "reuse"}
        check(len(reused) == 1 and not reused & set(fresh), (path, reused, fresh))


@suite.test
def udp_echo_through_every_path():
    out, table, rows, summary = run(UDP_TARGET)
    check(len(rows) == 4 * (4 + 6), len(rows))
    routes_right(rows)
    flows_right(rows)
    for name in ("direct", "vl-tls", "vl-ws", "v2ray"):
        p = summary["paths"][name]
        check(p["new"]["n"] == 4 and p["reuse"]["n"] == 6, p)
        check(p["stall"]["verdict"] == "n/a", p["stall"])
        if name != "direct":
            check(p["new"]["paired_n"] == 4 and p["routes"] == {"vless": 10}, p)
    check("stall verdict: not applicable" in table, table)
    v = verify(out)
    check("verify: OK" in v and "udp.packet lines in the log" in v, v)


@suite.test
def thousand_datagrams_on_one_session_none_lost():
    """The issue's interop acceptance with the runner's own client: 1000 datagrams through one VLESS
    UDP session, none lost, each echo naming the session; the server counts exactly what was sent."""
    out, _, rows, _ = run(UDP_TARGET, paths=[f"vl-tls={LINK_TLS}"], new=0, reuse=1000, extra=["--pause-ms", 0])
    vl = [s for s in rows if s["path"] == "vl-tls"]
    check(len(vl) == 1000 and all(s["ok"] == "1" and s["route"] == "vless" for s in vl), vl[:2])
    sessions = {s["session"] for s in vl}
    check(len(sessions) == 1, sessions)
    check("verify: OK" in verify(out))
    # 1000 samples, one warm-up and the unrecorded first datagram that opened the flow. A pause
    # longer than udp_idle_timeout_ms on a busy machine splits the flow into several lines: the
    # session's lines are summed once they add up (or the wait ends).
    sid = int(sessions.pop())
    deadline = time.monotonic() + 8
    while True:
        lines = D.events("udp.packet", vless_session=sid)
        got = (sum(e["packets_in"] for e in lines), sum(e["packets_out"] for e in lines))
        if got == (1002, 1002) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(got == (1002, 1002), lines)


@suite.test
def dns_query_through_every_path():
    mark = D.mark()
    out, table, rows, summary = run(DNS_TARGET)
    routes_right(rows)
    flows_right(rows)
    check(summary["paths"]["v2ray"]["kind"] == "socks5", summary["paths"]["v2ray"])
    v = verify(out)
    check("verify: OK" in v and "dns.query lines in the log" in v, v)
    # The daemon saw each query through the session the answer named.
    logged = {(e.get("vless_session"), e["route"]) for e in D.events("dns.query", since=mark)
              if e["name"] == "host.vlessbench.test"}
    for s in rows:
        want = (int(s["session"]) if s["session"] else None, s["route"])
        check(want in logged, (s, sorted(logged, key=str)[:5]))


@suite.test
def ntp_and_stun_through_every_path():
    """ntp:// and stun:// (issue 43) time a query to the [[udp_target]] modes as dns:// does. STUN's
    SOFTWARE names the route, so its samples are checked and verified like udp://; an NTP answer has
    no room for one: its samples carry none, and the target's udp.packet lines name the sessions."""
    out, _, rows, _ = run(f"stun://{LOOPBACK}:{D.port('stun')}")
    routes_right(rows)
    flows_right(rows)
    v = verify(out)
    check("verify: OK" in v and "udp.packet lines in the log" in v, v)
    mark = D.mark()
    out, _, rows, summary = run(f"ntp://{LOOPBACK}:{D.port('ntp')}", new=2, reuse=3)
    check(len(rows) == 4 * 5 and all(s["ok"] == "1" and s["route"] == "unknown" for s in rows), rows[:3])
    check(summary["run"]["target"].startswith("ntp://"), summary["run"])
    for route in ("vless", "direct"):
        D.wait_event("udp.packet", since=mark, timeout=8, listener="ntp", route=route)
    lines = D.events("udp.packet", since=mark, listener="ntp")
    check(any(e["route"] == "vless" for e in lines) and any(e["route"] == "direct" for e in lines), lines)
    check(all(e["packets_out"] == e["packets_in"] for e in lines), lines)
    check(all(e.get("vless_user") == "alice" for e in lines if e["route"] == "vless"), lines)


@suite.test
def udp_and_dns_over_httpupgrade_and_grpc():
    paths = [f"vl-up={LINK_UP}", f"vl-grpc={LINK_GRPC}"]
    for target in (UDP_TARGET, DNS_TARGET):
        out, _, rows, _ = run(target, paths=paths)
        routes_right(rows)
        flows_right(rows, ("vl-up", "vl-grpc"))
        check("verify: OK" in verify(out), target)


@suite.test
def refused_name_is_a_failed_sample():
    _, _, rows, _ = run(f"dns://{LOOPBACK}:{DNS_PORT}/example.com", paths=[f"vl-tls={LINK_TLS}"], new=2,
                        reuse=2, expect_rc=1)
    check(rows and all(s["ok"] == "0" and s["error"] == "dns: rcode REFUSED" for s in rows), rows[:2])
    # The answer still named its route.
    check({s["route"] for s in rows} == {"direct", "vless"}, rows)


@suite.test
def lost_and_refused_datagrams_are_failed_samples():
    out = tempdir("vlessbench-udp-lost-")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:  # takes datagrams, never answers
        sink.bind((LOOPBACK, 0))
        r = runner("run", "--target", f"udp://{LOOPBACK}:{sink.getsockname()[1]}", "--new", 2, "--reuse", 1,
                   "--warmup", 0, "--timeout", 0.2, "--out", out)
    check(r.returncode == 1 and "every sample failed" in r.stderr, r.stderr)
    rows = list(csv.DictReader(open(out / "samples.csv", newline="")))
    check([s["error"] for s in rows] == ["reply: timeout after 200 ms"] * 2 +
          ["open flow: first datagram: reply: timeout after 200 ms"], rows)
    r = runner("run", "--target", f"udp://{LOOPBACK}:{free_port(proto='udp')}", "--new", 1, "--reuse", 0, "--warmup", 0,
               "--out", out)
    rows = list(csv.DictReader(open(out / "samples.csv", newline="")))
    check(r.returncode == 1 and rows[0]["error"] == "reply: Connection refused", rows)


def relay_ports(dest_port: int) -> set[int]:
    """Local ports of the UDP sockets connected to 127.0.0.1:dest_port (/proc/net/udp)."""
    ports = set()
    for line in open("/proc/net/udp").read().splitlines()[1:]:
        local, remote = line.split()[1:3]
        if remote == f"0100007F:{dest_port:04X}":
            ports.add(int(local.split(":")[1], 16))
    return ports


@suite.test
def reused_relay_port_is_a_new_flow_with_its_own_route():
    """A closed VLESS session's relay port, reused by a direct client before the flow idled, must
    not inherit the session's route (the runner's interleaved new flows hit this). A daemon of its
    own, whose flows idle only after 30 s: the old flow is certainly still there when the port
    comes back, however slow the machine."""
    d = Daemon({"users": [{"name": "alice", "uuid": UUID}],
                "vless": [{"name": "tls", "listen": ANY_PORT}],
                "udp_target": [{"name": "udp", "listen": ANY_PORT}]},
               limits={"udp_idle_timeout_ms": 30000})
    try:
        reused_port_case(d, d.port("udp"))
    finally:
        d.stop()


def reused_port_case(d: Daemon, udp_port: int) -> None:
    mark = d.mark()
    before = relay_ports(udp_port)
    with TlsClient(d.port("tls")) as c:
        c.handshake()
        c.send(vless_header(UUID, udp_port, cmd=2) + udp_frame(echo_datagram(b"ping")))
        read_vless_response_header(c.stream)
        payload, _, route = udp_echo_trailer(read_udp_frame(c.stream))
        check(payload == b"ping" and route.startswith("vless session="), route)
        ports = relay_ports(udp_port) - before
        check(len(ports) == 1, ports)
        c.close_notify()
    d.wait_event("vless.session", since=mark, cmd="udp")
    port = ports.pop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((LOOPBACK, port))
        u.settimeout(3)
        u.sendto(echo_datagram(b"plain"), (LOOPBACK, udp_port))
        echo = u.recv(65535)
    check(udp_echo_trailer(echo) == (b"plain", "udp", "direct"), echo)
    e = d.wait_event("udp.packet", since=mark, peer=f"{LOOPBACK}:{port}", close_reason="route_changed")
    check(e["route"] == "vless" and e["packets_in"] == 1, e)


@suite.test
def proxy_path_that_goes_direct_is_a_mismatch():
    paths = [f"leaky=socks5://{LOOPBACK}:{SOCKS_FREE}"]
    _, table, rows, _ = run(UDP_TARGET, paths=paths, new=2, reuse=3, expect_rc=1)
    leaky = [s for s in rows if s["path"] == "leaky"]
    check(len(leaky) == 5 and all(s["ok"] == "1" and s["route"] == "direct" and s["route_mismatch"] == "1"
                                  for s in leaky), leaky)
    check("ROUTE MISMATCH x5 (proxy path answered directly)" in table, table)
    out, _, _, _ = run(UDP_TARGET, paths=paths, new=2, reuse=3, extra=["--allow-mismatch"])
    v = verify(out, want_ok=False)
    check("route mismatches (log route vs path kind): 5" in v, v)


@suite.test
def verify_catches_a_claimed_session_the_server_never_had():
    out, _, rows, _ = run(DNS_TARGET, paths=[f"vl-tls={LINK_TLS}"], new=2, reuse=2)
    check("verify: OK" in verify(out))
    text = (out / "samples.csv").read_text()
    session = next(s["session"] for s in rows if s["path"] == "vl-tls")
    (out / "samples.csv").write_text(text.replace(f",{session},", ",999999,", 1))
    v = runner("verify", out, "--log", D.access)
    check(v.returncode == 1 and "logged no dns.query for route vless session 999999" in v.stdout, v.stdout)


@suite.test
def paths_that_cannot_carry_udp_are_usage_errors():
    out = tempdir("vlessbench-udp-usage-")
    cases = [
        (UDP_TARGET, "h=http://127.0.0.1:1", "path 'h' (http-connect) cannot carry a udp:// target"),
        (DNS_TARGET, "t=tun", "path 't' (tun) cannot carry a dns:// target"),
        (UDP_TARGET, "f=tcp://127.0.0.1:1", "path 'f' (forward) cannot carry a udp:// target"),
        (f"udp://{LOOPBACK}", "direct", "a udp:// target needs a port"),
        (f"udp://{LOOPBACK}:1/x", "direct", "a udp:// target has no path"),
        (f"dns://{LOOPBACK}:53/", "direct", "a dns:// target is dns://HOST[:PORT]/NAME"),
    ]
    for target, path, want in cases:
        r = runner("run", "--target", target, "--path", path, "--new", 1, "--reuse", 0, "--out", out)
        check(r.returncode == 2 and want in r.stderr, (target, path, r.returncode, r.stderr))
    r = runner("run", "--target", UDP_TARGET, "--bulk", "1M", "--out", out)
    check(r.returncode == 2 and "--bulk: needs an http:// or https:// target" in r.stderr, r.stderr)


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        V2.stop()
        D.stop()
