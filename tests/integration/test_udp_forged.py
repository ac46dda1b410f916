"""Issue 23, item 10: a datagram forged with a live VLESS UDP relay's source address. In a network
namespace of the test's own, joined by a veth pair to a second one (the "network": 10.77.23.2),
the daemon's [[udp_target]] and [[dns]] listen on 0.0.0.0 and a raw VLESS UDP session reaches
them at the veth address 10.77.23.1, so its relay socket is 10.77.23.1:P. A raw socket
(IP_HDRINCL) then forges datagrams from 10.77.23.1:P to the target:
- from the second namespace over the veth, with the kernel's default accept_local=0: dropped by
  the kernel (a local source address arriving from outside), nothing reaches the session;
- the same with accept_local=1 on the veth (an operator's change): the datagram would reach the
  target, whose socket filter drops it (source equal to destination, not arrived on lo: a genuine
  one between two sockets of the machine travels over lo; core/net/udp_dest.hpp), instead of
  answering it into the session as relayed (main does: the echo's trailer names the session); the
  socket's drop count (/proc/net/udp) shows both forged datagrams;
- over IPv6 ([::] echo at fd77:23::1), where Linux has no accept_local and takes a local source
  from the network by default: dropped by the same filter (main echoes it into the session);
- from the same namespace (arrives on lo): indistinguishable from a genuine one, still relayed
  (docs/sessions.md says why); printed as a figure.
Ordering replaces sleeps: after a forged datagram the test gets an answer to a genuine one from
the same sender, then sends a datagram through the session: the first packet the session brings
back shows whether the forged one got in. Skipped (77) without root (namespaces, raw sockets)."""
import atexit
import os
import sys
import socket
import struct
import subprocess

from harness import (Daemon, Skip, Suite, TlsClient, set_pdeathsig, check, dns_query, free_port, new_uuid,
                     read_vless_response_header, require_binary, run_in_own_netns, vless_header)
from harness import read_udp_frame as read_packet
from harness import udp_echo_trailer as trailer
from harness import udp_frame as frame

run_in_own_netns()

suite = Suite("test_udp_forged")
require_binary()

HERE, PEER = "10.77.23.1", "10.77.23.2"
HERE6, PEER6 = "fd77:23::1", "fd77:23::2"


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, timeout=10)


def make_peer_namespace():
    """A second network namespace held by a sleeping process, joined to ours by a veth pair."""
    if not os.path.exists("/usr/bin/nsenter") and not os.path.exists("/bin/nsenter"):
        raise Skip("nsenter (util-linux) is needed to act in the second namespace")
    # Not a harness process: it ends at exit (atexit, and PR_SET_PDEATHSIG if the test dies), after
    # the suite's own cleanup, which would otherwise name it as left running.
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "600"], preexec_fn=set_pdeathsig)
    atexit.register(lambda: (holder.kill(), holder.wait(5)))
    ns = f"/proc/{holder.pid}/ns/net"
    for _ in range(100):  # bounded: unshare has switched namespaces once the link differs
        if os.readlink(ns) != os.readlink("/proc/self/ns/net"):
            break
        subprocess.run(["sleep", "0.02"], check=True)
    sh("ip", "link", "add", "vf0", "type", "veth", "peer", "name", "vf1", "netns", str(holder.pid))
    sh("ip", "addr", "add", f"{HERE}/24", "dev", "vf0")
    sh("ip", "addr", "add", f"{HERE6}/64", "dev", "vf0", "nodad")
    sh("ip", "link", "set", "vf0", "up")
    for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{PEER}/24", "dev", "vf1"],
                ["ip", "addr", "add", f"{PEER6}/64", "dev", "vf1", "nodad"], ["ip", "link", "set", "vf1", "up"]):
        sh("nsenter", f"--net={ns}", *cmd)
    return holder, ns


HOLDER, PEER_NS = make_peer_namespace()


def sysctl(name: str, value: int) -> None:
    with open(f"/proc/sys/net/ipv4/conf/{name}", "w") as f:
        f.write(f"{value}\n")


# rp_filter off everywhere (a new namespace's default is 0 already; the machine's may differ): only
# accept_local decides in the check that flips it.
sysctl("all/rp_filter", 0)
sysctl("vf0/rp_filter", 0)
sysctl("vf0/accept_local", 0)

UUID = new_uuid()
UDP_PORT, DNS_PORT, UDP6_PORT = free_port(), free_port(), free_port()
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": f"127.0.0.1:{free_port()}"}],
    "target": [{"name": "http", "listen": f"127.0.0.1:{free_port()}"}],
    "udp_target": [{"name": "udp", "listen": f"0.0.0.0:{UDP_PORT}"}, {"name": "udp6", "listen": f"[::]:{UDP6_PORT}"}],
    "dns": [{"name": "dns", "listen": f"0.0.0.0:{DNS_PORT}"}],
}, limits={"udp_idle_timeout_ms": 30000})

# Sends one IPv4/UDP datagram with a forged source (UDP checksum 0: none), then one from its own
# address to the same port and waits for that one's answer: the forged datagram, queued before it,
# has been read by the target by then.
FORGE = r"""
import socket, struct, sys
src, sport, dst, dport, payload, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
    bytes.fromhex(sys.argv[5]), bytes.fromhex(sys.argv[6])
udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, socket.IPPROTO_UDP, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as r:
    r.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    r.sendto(ip + udp, (dst, dport))
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
    u.settimeout(5)
    u.sendto(sync, (dst, dport))
    u.recv(65535)
"""


# IPv6: no IP_HDRINCL; a raw IPPROTO_RAW socket of AF_INET6 takes the whole packet (Linux), so the
# UDP checksum (mandatory over IPv6) is computed here.
FORGE6 = r"""
import socket, struct, sys
src, sport, dst, dport, payload, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
    bytes.fromhex(sys.argv[5]), bytes.fromhex(sys.argv[6])
s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
ln = 8 + len(payload)
pseudo = s6 + d6 + struct.pack(">IxxxB", ln, 17) + struct.pack(">HHHH", sport, dport, ln, 0) + payload
if len(pseudo) % 2: pseudo += b"\0"
c = sum(struct.unpack(">%dH" % (len(pseudo) // 2), pseudo))
while c >> 16: c = (c & 0xFFFF) + (c >> 16)
c = (~c & 0xFFFF) or 0xFFFF
udp = struct.pack(">HHHH", sport, dport, ln, c) + payload
ip = struct.pack(">IHBB", 6 << 28, ln, 17, 64) + s6 + d6
with socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW) as r:
    r.sendto(ip + udp, (dst, 0))
with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as u:
    u.settimeout(5)
    u.sendto(sync, (dst, dport))
    u.recv(65535)
"""


def forge6(src_port: int, dst_port: int, payload: bytes, sync: bytes) -> None:
    argv = ["nsenter", f"--net={PEER_NS}", sys.executable, "-c", FORGE6, HERE6, str(src_port), HERE6, str(dst_port),
            payload.hex(), sync.hex()]
    subprocess.run(argv, check=True, timeout=15)


def forge(src_port: int, dst_port: int, payload: bytes, sync: bytes, from_peer: bool) -> None:
    argv = [sys.executable, "-c", FORGE, HERE, str(src_port), HERE, str(dst_port), payload.hex(), sync.hex()]
    if from_peer:
        argv = ["nsenter", f"--net={PEER_NS}", *argv]
    subprocess.run(argv, check=True, timeout=15)


def relay_port(dst_port: int, host: str = HERE) -> int:
    """The local port of the daemon's connected UDP socket to host:dst_port (the session's relay)."""
    at = f"[{host}]" if ":" in host else host
    out = subprocess.run(["ss", "-Hnu", "state", "established", "dst", f"{at}:{dst_port}"], check=True,
                         capture_output=True, text=True, timeout=10).stdout.split()
    locals_ = [w for w in out if w.startswith(f"{at}:") and not w.endswith(f":{dst_port}")]
    check(len(locals_) == 1, f"one relay socket to {at}:{dst_port} expected: {out}")
    return int(locals_[0].rsplit(":", 1)[1])


def socket_drops(port: int) -> int:
    """The kernel's drop count of the daemon's UDP socket bound to port (/proc/net/udp, last column)."""
    with open("/proc/net/udp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    mine = [r for r in rows if r[1].endswith(f":{port:04X}") and r[2] == "00000000:0000"]
    check(len(mine) == 1, f"one socket bound to port {port} expected: {mine}")
    return int(mine[0][-1])


def echo_session_case(from_peer: bool) -> tuple[bytes, str]:
    """The first datagram the session brings back after a forged one: (payload, route)."""
    with TlsClient(D.port("edge")) as c:
        c.handshake()
        c.send(vless_header(UUID, UDP_PORT, addr=HERE, cmd=2) + frame(b"genuine-1" + b"." * 64))
        read_vless_response_header(c.stream)
        payload, _, route = trailer(read_packet(c.stream))
        check(payload.startswith(b"genuine-1") and route.startswith("vless session="), (payload, route))
        forge(relay_port(UDP_PORT), UDP_PORT, b"FORGED" + b"." * 64, b"sync" + b"." * 64, from_peer)
        c.send(frame(b"genuine-2" + b"." * 64))
        payload, _, got_route = trailer(read_packet(c.stream))
        c.close_notify()
        return payload, got_route


def dns_session_case(from_peer: bool) -> bytes:
    """The first DNS answer the session brings back after a forged query: its id."""
    with TlsClient(D.port("edge")) as c:
        c.handshake()
        c.send(vless_header(UUID, DNS_PORT, addr=HERE, cmd=2) + frame(dns_query(1, "a.vlessbench.test")))
        read_vless_response_header(c.stream)
        check(read_packet(c.stream)[:2] == b"\x00\x01")
        forge(relay_port(DNS_PORT), DNS_PORT, dns_query(0x0BAD, "forged.vlessbench.test"),
              dns_query(3, "sync.vlessbench.test"), from_peer)
        c.send(frame(dns_query(2, "a.vlessbench.test")))
        answer = read_packet(c.stream)
        c.close_notify()
        return answer[:2]


@suite.test
def kernel_drops_a_forged_local_source_from_the_network():
    sysctl("vf0/accept_local", 0)
    payload, _ = echo_session_case(from_peer=True)
    check(payload.startswith(b"genuine-2"), f"with accept_local=0 a forged datagram reached the session: {payload[:20]!r}")
    check(dns_session_case(from_peer=True) == b"\x00\x02", "a forged DNS query reached the session")


@suite.test
def target_socket_drops_a_relay_source_from_the_network():
    sysctl("vf0/accept_local", 1)
    try:
        before = socket_drops(UDP_PORT) + socket_drops(DNS_PORT)
        payload, route = echo_session_case(from_peer=True)
        check(payload.startswith(b"genuine-2"),
              f"a datagram forged over the veth with the relay's source was echoed into the session as "
              f"{route!r}: {payload[:20]!r}")
        check(dns_session_case(from_peer=True) == b"\x00\x02",
              "a DNS query forged over the veth with the relay's source was answered into the session")
        n = socket_drops(UDP_PORT) + socket_drops(DNS_PORT) - before
        print(f"FIGURE forged_relay_source_dropped = {n}")
        check(n == 2, f"the targets' sockets dropped {n} datagrams, not the 2 forged ones")
    finally:
        sysctl("vf0/accept_local", 0)


@suite.test
def ipv6_relay_source_from_the_network_is_dropped():
    # IPv6 has no accept_local: Linux takes a datagram with one of its own addresses as source from
    # the network by default, so here the socket filter is all there is.
    with TlsClient(D.port("edge")) as c:
        c.handshake()
        c.send(vless_header(UUID, UDP6_PORT, addr=HERE6, cmd=2) + frame(b"genuine-1" + b"." * 64))
        read_vless_response_header(c.stream)
        payload, _, route = trailer(read_packet(c.stream))
        check(payload.startswith(b"genuine-1") and route.startswith("vless session="), (payload, route))
        forge6(relay_port(UDP6_PORT, HERE6), UDP6_PORT, b"FORGED" + b"." * 64, b"sync" + b"." * 64)
        c.send(frame(b"genuine-2" + b"." * 64))
        payload, _, route = trailer(read_packet(c.stream))
        c.close_notify()
    check(payload.startswith(b"genuine-2"),
          f"an IPv6 datagram forged over the veth with the relay's source was echoed into the session as "
          f"{route!r}: {payload[:20]!r}")


@suite.test
def same_host_forgery_is_not_told_apart():
    # Documented (docs/sessions.md): a raw socket on the machine itself sends over lo, as the relay does.
    payload, route = echo_session_case(from_peer=False)
    relayed = int(payload.startswith(b"FORGED"))
    print(f"FIGURE same_host_forged_relayed = {relayed}")
    check(relayed == 1 and route.startswith("vless session="),
          f"a same-host forgery is no longer relayed ({payload[:20]!r}, {route!r}): update docs/sessions.md")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
