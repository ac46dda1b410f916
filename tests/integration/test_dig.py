"""A real resolver client against the [[dns]] responder (issue 27 item 7): `dig` (bind9-dnsutils)
over UDP and TCP, direct and through v2ray 4.34 (a dokodemo-door inbound forwarding port 53
traffic through its VLESS outbound to the daemon, which relays it to the responder). Each answer's
A record and the TXT route record (docs/target.md, "Route proof in every answer") are read from
dig's own output: direct answers say `direct`, relayed ones name the VLESS session."""
import shutil
import subprocess

from harness import ANY_PORT, LOOPBACK, Daemon, Suite, V2ray, check, free_port, require_binary

suite = Suite("test_dig")
require_binary()
DIG = shutil.which("dig")
if not DIG:
    print("SKIP: dig not installed (bind9-dnsutils; tools/deps.sh --test)")
    raise SystemExit(77)

DNS_PORT = free_port()
D = Daemon({
    "users": [{"name": "alice", "uuid": "8f6f2c2e-8a3e-4c55-9a65-4f1b1f0e7a11"}],
    "vless": [{"name": "tls", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT}],
    "dns": [{"name": "dns", "listen": f"{LOOPBACK}:{DNS_PORT}"}],
})
DOKO_PORT = free_port()
V = V2ray({
    "log": {"loglevel": "warning"},
    "inbounds": [{"listen": LOOPBACK, "port": DOKO_PORT, "protocol": "dokodemo-door",
                  "settings": {"address": LOOPBACK, "port": DNS_PORT, "network": "tcp,udp"}}],
    "outbounds": [{"protocol": "vless",
                   "settings": {"vnext": [{"address": LOOPBACK, "port": D.port("tls"),
                                           "users": [{"id": D.uuid, "encryption": "none"}]}]},
                   "streamSettings": {"network": "tcp", "security": "tls",
                                      "tlsSettings": {"serverName": "localhost", "allowInsecure": True}}}],
}, DOKO_PORT)


def dig(port: int, name: str, tcp: bool) -> tuple[list[str], list[str]]:
    """(A answers, TXT strings of the additional section) as dig prints them."""
    argv = [DIG, "@127.0.0.1", "-p", str(port), name, "A", "+tries=1", "+time=3", "+noall", "+answer",
            "+additional", "+nocookie", "+noedns"] + (["+tcp"] if tcp else ["+notcp"])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, f"dig rc {r.returncode}: {r.stdout}{r.stderr}")
    a, txt = [], []
    for line in r.stdout.splitlines():
        f = line.split(None, 4)
        if len(f) == 5 and f[3] == "A":
            a.append(f[4])
        elif len(f) == 5 and f[3] == "TXT":
            txt.append(f[4].strip('"'))
    return a, txt


def one(port: int, tcp: bool, route_prefix: str) -> str:
    a, txt = dig(port, "host.vlessbench.test", tcp)
    check(a == ["127.0.0.1"], (a, txt))
    check(len(txt) == 1 and txt[0].startswith(f"VLESSBENCH-DNS dns {route_prefix}"), txt)
    return txt[0]


@suite.test
def dig_direct_over_udp_and_tcp():
    for tcp in (False, True):
        print("  direct", "tcp" if tcp else "udp", one(DNS_PORT, tcp, "direct"), flush=True)
    D.wait_event("dns.query", transport="udp", route="direct")
    D.wait_event("dns.query", transport="tcp", route="direct")


@suite.test
def dig_through_v2ray_vless_over_udp_and_tcp():
    for tcp in (False, True):
        txt = one(DOKO_PORT, tcp, "vless session=")
        print("  v2ray", "tcp" if tcp else "udp", txt, flush=True)
        sid = int(txt.split("session=")[1].split()[0])
        D.wait_event("dns.query", transport="tcp" if tcp else "udp", vless_session=sid)


@suite.test
def dig_gets_refused_outside_the_zone():
    r = subprocess.run([DIG, "@127.0.0.1", "-p", str(DNS_PORT), "example.com", "A", "+tries=1", "+time=3"],
                       capture_output=True, text=True, timeout=20)
    check("status: REFUSED" in r.stdout, r.stdout)


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        V.stop()
        D.stop()
