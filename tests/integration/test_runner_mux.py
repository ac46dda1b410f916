"""The runner's Mux.Cool client (`vless://...&mux=on`, issue 12) against the real v2ray 4.34 VLESS
server, which implements Mux.Cool's server side. v2ray's server sends every sub-connection on as
its own VLESS connection to our daemon (a vless outbound), so each sample's route is proven on the
target ("vless session=ID"), and v2ray's access log shows what came in over how many connections:
each sub is a line "from 127.0.0.1:PORT accepted tcp:TARGET" whose PORT is the runner's end of
the mux connection it rode on. Against our own daemon's Mux.Cool server the subs show as
vless.sub lines of one vless.session cmd=mux, and each request names its session and sub.
udp:// and dns:// targets over mux=on (a Mux.Cool UDP sub per flow) and packetEncoding=xudp (XUDP
subs) against our daemon: the echo's trailer / the DNS answer's TXT names the session and sub, the
daemon's vless.sub lines say net=udp (xudp for XUDP), and `vlessbench verify` pairs the samples with
its udp.packet / dns.query lines."""
import csv
import json
import re
import subprocess
import time

from harness import (ANY_PORT, CLIENT_BIN, BIN, LOOPBACK, Daemon, Suite, V2ray, check, free_port, make_cert, require_binary,
                     tempdir, verify_log)

suite = Suite("test_runner_mux")
require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
D = Daemon()
TARGET = f"http://{LOOPBACK}:{D.target_port}/"
CERT, KEY = make_cert(tempdir())


# A daemon with the UDP echo and the DNS responder; flows idle for 400 ms are logged (udp.packet)
# and forgotten, so verify can run soon after a run.
DU = Daemon({
    "users": [{"name": "alice", "uuid": D.uuid}],
    "vless": [{"name": "tls", "listen": ANY_PORT}],
    "udp_target": [{"name": "udp", "listen": ANY_PORT}],
    "dns": [{"name": "dns", "listen": ANY_PORT}],
}, limits={"udp_idle_timeout_ms": 400})
UDP_PORT = DU.port("udp")
DNS_PORT = DU.port("dns")  # TCP and UDP


def v2ray_mux_server(port: int, access: str) -> dict:
    """VLESS+TLS inbound (Mux.Cool is its server side's) -> VLESS+TLS outbound to our daemon."""
    return {
        "log": {"loglevel": "warning", "access": access},
        "inbounds": [{
            "listen": LOOPBACK, "port": port, "protocol": "vless",
            "settings": {"clients": [{"id": D.uuid}], "decryption": "none"},
            "streamSettings": {"network": "tcp", "security": "tls",
                               "tlsSettings": {"certificates": [{"certificateFile": str(CERT),
                                                                 "keyFile": str(KEY)}]}},
        }],
        "outbounds": [{
            "protocol": "vless",
            "settings": {"vnext": [{"address": LOOPBACK, "port": D.port("kernel"),
                                    "users": [{"id": D.uuid, "encryption": "none"}]}]},
            "streamSettings": {"network": "tcp", "security": "tls",
                               "tlsSettings": {"serverName": "localhost", "allowInsecure": True}},
        }],
    }


V2_PORT = free_port()
V2_ACCESS = tempdir("vlessbench-v2ray-access-") / "access.log"
V = V2ray(v2ray_mux_server(V2_PORT, str(V2_ACCESS)), V2_PORT)


def mux_link(extra: str = "") -> str:
    return (f"vless://{D.uuid}@{LOOPBACK}:{V2_PORT}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp&mux=on{extra}#v2ray-mux")


def run(paths, new: int, reuse: int, warmup: int, target: str = TARGET, with_out: bool = False):
    out = tempdir("vlessbench-run-")
    argv = [str(RUNNER), "run", "--target", target, "--new", str(new), "--reuse", str(reuse),
            "--warmup", str(warmup), "--out", str(out), "--seed", "7"]
    for p in paths:
        argv += ["--path", p]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    summary = json.loads((out / "summary.json").read_text())
    return (rows, summary, out) if with_out else (rows, summary)


def access_lines(since: int) -> list[str]:
    """v2ray's access lines for our target from byte offset `since` on."""
    text = V2_ACCESS.read_bytes()[since:].decode(errors="replace")
    return [line for line in text.splitlines() if f"accepted tcp:{LOOPBACK}:{D.target_port}" in line]


def source_ports(lines) -> list[int]:
    ports = []
    for line in lines:
        m = re.search(r"(?:from )?(?:tcp:)?127\.0\.0\.1:(\d+) accepted", line)
        check(m, line)
        ports.append(int(m.group(1)))
    return ports


def wait_access(since: int, count: int, timeout: float = 5.0) -> list[str]:
    """v2ray writes its access log asynchronously: wait (bounded) for count lines."""
    deadline = time.monotonic() + timeout
    while True:
        lines = access_lines(since)
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def access_offset() -> int:
    return V2_ACCESS.stat().st_size if V2_ACCESS.exists() else 0


def check_samples(samples, path: str, count: int):
    mine = [s for s in samples if s["path"] == path]
    check(len(mine) == count, len(mine))
    check(all(s["ok"] == "1" for s in mine), [s for s in mine if s["ok"] != "1"][:3])
    # Every sub reached the target through v2ray's VLESS outbound and our daemon.
    check(all(s["route"] == "vless" for s in mine), {s["route"] for s in mine})


@suite.test
def every_sample_is_a_sub_of_one_mux_connection():
    new, reuse, warmup = 8, 12, 2
    since, mark = access_offset(), D.mark()
    samples, summary = run([f"mx={mux_link()}"], new, reuse, warmup)
    check_samples(samples, "mx", new + reuse)
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    # Subs: one per new-connection sample (warm-ups too) and the reused one (opened with a GET
    # outside the clock, then reuse samples on it).
    subs = (new + warmup) + 1
    lines = wait_access(since, subs)
    check(len(lines) == subs, (len(lines), lines[-3:]))
    ports = set(source_ports(lines))
    check(len(ports) == 1, f"subs came over {len(ports)} connections: {sorted(ports)}")
    # Each sub became its own VLESS session from v2ray's outbound to our daemon.
    sessions = D.events("vless.session", since=mark)
    deadline = time.monotonic() + 5
    while len(sessions) < subs and time.monotonic() < deadline:
        time.sleep(0.05)
        sessions = D.events("vless.session", since=mark)
    check(len(sessions) == subs, len(sessions))


@suite.test
def muxnew_connection_opens_a_mux_connection_per_new_sample():
    new, reuse, warmup = 5, 4, 1
    since = access_offset()
    samples, _ = run([f"fresh={mux_link('&muxnew=connection')}"], new, reuse, warmup)
    check_samples(samples, "fresh", new + reuse)
    lines = wait_access(since, new + warmup + 1)
    ports = source_ports(lines)
    check(len(lines) == new + warmup + 1, len(lines))
    # Every new-connection sample on a connection of its own; the reused sub on the shared one.
    check(len(set(ports)) == new + warmup + 1, ports)


@suite.test
def packet_encoding_xudp_is_accepted_and_tcp_still_muxes():
    new, reuse, warmup = 3, 3, 0
    since = access_offset()
    samples, summary = run([f"mx={mux_link('&packetEncoding=xudp')}"], new, reuse, warmup)
    check_samples(samples, "mx", new + reuse)
    check("packetEncoding=xudp" in summary["paths"]["mx"]["spec"], summary["paths"]["mx"])
    check(len(set(source_ports(wait_access(since, new + 1)))) == 1, "more than one mux connection")


@suite.test
def against_our_daemon_one_mux_session_with_a_sub_per_sample():
    # The daemon's own Mux.Cool server (server/mux_session): the runner's subs land as vless.sub
    # lines of one vless.session cmd=mux, and the target names the session and the sub.
    new, reuse, warmup = 6, 6, 1
    mark = D.mark()
    link = (f"vless://{D.uuid}@{LOOPBACK}:{D.port('kernel')}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp&mux=on#ours-mux")
    samples, summary = run([f"ours={link}"], new, reuse, warmup)
    check_samples(samples, "ours", new + reuse)
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    subs_expected = (new + warmup) + 1
    # The runner has exited: its connection closed, the session ends after its subs.
    s = D.wait_event("vless.session", since=mark, timeout=10, cmd="mux")
    sessions = D.events("vless.session", since=mark)
    check(len(sessions) == 1, [(e["session"], e["cmd"]) for e in sessions])
    sid = s["session"]
    subs = D.events("vless.sub", since=mark)
    check(len(subs) == subs_expected and all(e["session"] == sid for e in subs), subs[-3:])
    check(all(e["dest"] == f"{LOOPBACK}:{D.target_port}" and e["net"] == "tcp" for e in subs), subs[:2])
    check(s["subs"] == subs_expected and s["subs_refused"] == 0, s)
    # Every request of the run (samples, warm-ups, the reused sub's first GET) on one of them.
    by_sub = {e["sub"] for e in subs}
    requests = [e for e in D.events("http.request", since=mark) if e.get("path_label") == "ours"]
    check(len(requests) == (new + warmup) + (reuse + warmup) + 1, len(requests))
    check(all(r["route"] == "vless" and r["vless_session"] == sid and r["vless_sub"] in by_sub for r in requests),
          requests[:2])
    check({r["vless_sub"] for r in requests} == by_sub, (sorted(by_sub), requests[:2]))


@suite.test
def bad_mux_parameters_are_refused():
    for extra, why in (("&mux=maybe", "mux must be on or off"), ("&muxnew=often", "muxnew must be sub or connection"),
                       ("&packetEncoding=packet", "packetEncoding must be xudp or none")):
        r = subprocess.run([str(RUNNER), "run", "--target", TARGET, "--new", "1", "--reuse", "0", "--path",
                            f"p={mux_link(extra)}"], capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and why in r.stderr, (extra, r.returncode, r.stderr))


def udp_link(extra: str) -> str:
    return (f"vless://{D.uuid}@{LOOPBACK}:{DU.port('tls')}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp{extra}#udp-mux")


def verify(out):
    """udp.packet / dns.query lines are written once a flow idles (400 ms here): retried, bounded."""
    verify_log(RUNNER, DU.access, out)


def check_udp_run(extra: str, target: str, xudp: bool, shared: bool):
    new, reuse, warmup = 4, 4, 1
    mark = DU.mark()
    samples, summary, out = run([f"u={udp_link(extra)}"], new, reuse, warmup, target=target, with_out=True)
    check_samples(samples, "u", new + reuse)
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    # One flow per new sample (warm-ups too) and the reused one: a sub each.
    subs_expected = (new + warmup) + 1
    s = DU.wait_event("vless.session", since=mark, timeout=10, cmd="mux")
    deadline = time.monotonic() + 10
    sessions = DU.events("vless.session", since=mark)
    while len(sessions) < (1 if shared else subs_expected) and time.monotonic() < deadline:
        time.sleep(0.05)
        sessions = DU.events("vless.session", since=mark)
    check(all(e["cmd"] == "mux" for e in sessions), sessions)
    subs = DU.events("vless.sub", since=mark)
    check(len(subs) == subs_expected, (len(subs), subs[-2:]))
    check(all(e["net"] == "udp" and e.get("xudp", False) == xudp for e in subs), subs[:2])
    if shared:  # mux=on: one mux connection carries every flow
        check(len(sessions) == 1 and s["subs"] == subs_expected, sessions)
    else:  # packetEncoding=xudp alone: a command 3 connection of its own per flow
        check(len(sessions) == subs_expected and all(e["subs"] == 1 for e in sessions), sessions)
    # Each sample's route proof names a mux session the daemon logged; the target's own lines
    # (udp.packet per flow, dns.query per query) name the session and the sub they came on.
    sids = {str(e["session"]) for e in sessions}
    mine = [r for r in samples if r["path"] == "u"]
    check(all(r["session"] in sids for r in mine), (mine[:2], sids))
    verify(out)
    event = "dns.query" if target.startswith("dns:") else "udp.packet"
    logged = {(e["session"], e["sub"]) for e in subs}
    lines = [e for e in DU.events(event, since=mark) if "vless_session" in e]
    check(len(lines) >= (new + warmup + 1 if event == "udp.packet" else new + reuse + 2 * warmup + 1), len(lines))
    check(all((e["vless_session"], e.get("vless_sub")) in logged for e in lines), (lines[:2], sorted(logged)[:3]))


@suite.test
def udp_and_dns_over_mux_udp_subs():
    check_udp_run("&mux=on", f"udp://{LOOPBACK}:{UDP_PORT}", xudp=False, shared=True)
    check_udp_run("&mux=on", f"dns://{LOOPBACK}:{DNS_PORT}/host.vlessbench.test", xudp=False, shared=True)


@suite.test
def udp_and_dns_over_xudp():
    check_udp_run("&mux=on&packetEncoding=xudp", f"udp://{LOOPBACK}:{UDP_PORT}", xudp=True, shared=True)
    check_udp_run("&mux=on&packetEncoding=xudp", f"dns://{LOOPBACK}:{DNS_PORT}/host.vlessbench.test", xudp=True,
                  shared=True)
    # packetEncoding=xudp without mux=on: Xray's VLESS outbound, one XUDP sub per connection.
    check_udp_run("&packetEncoding=xudp", f"udp://{LOOPBACK}:{UDP_PORT}", xudp=True, shared=False)


suite.run()
