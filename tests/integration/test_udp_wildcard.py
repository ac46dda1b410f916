"""The UDP echo target and the DNS responder on a wildcard address (0.0.0.0), as the installed
config has them, in a network namespace of the test's own with a LAN address as on a VM. The
daemon reads each datagram's destination address (core/net/udp_dest.hpp, IP_PKTINFO), so a VLESS UDP
session to the VM's address and one to 127.0.0.1 both reach the one socket and are both named;
a direct datagram to either address says direct; every answer comes from the address its
datagram was sent to (a client connected to the LAN address takes nothing else). A reload opens,
updates in place and closes UDP listeners and DNS responders, and one whose port is taken fails
the reload and changes nothing. Skipped (77) without root (namespace)."""
import socket

from harness import (Daemon, Suite, TlsClient, check, dns_query, echo_datagram, free_port, new_uuid, read_udp_frame,
                     read_vless_response_header, require_binary, run_in_own_netns, udp_echo_trailer, udp_frame,
                     vless_header)

LAN = "10.77.3.1"
run_in_own_netns(addresses=(LAN,))

suite = Suite("test_udp_wildcard")
require_binary()

UUID = new_uuid()
UDP_PORT = free_port()
DNS_PORT = free_port()
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": f"{LAN}:{free_port()}"}],
    "target": [{"name": "http", "listen": f"0.0.0.0:{free_port()}"}],
    "udp_target": [{"name": "udp", "listen": f"0.0.0.0:{UDP_PORT}"}],
    "dns": [{"name": "dns", "listen": f"0.0.0.0:{DNS_PORT}"}],
}, limits={"udp_idle_timeout_ms": 1000})
VP = D.port("edge")


def route_of(echo: bytes) -> str:
    return udp_echo_trailer(echo)[2]


def through_vless(dest: str, port: int, payloads: list[bytes]) -> tuple[list[bytes], dict]:
    """payloads through one VLESS UDP session to dest:port; the replies and the session's line."""
    mark = D.mark()
    with TlsClient(VP, host=LAN) as c:
        c.handshake()
        c.send(vless_header(UUID, port, addr=dest, cmd=2) + b"".join(udp_frame(p) for p in payloads))
        try:
            read_vless_response_header(c.stream)
            replies = [read_udp_frame(c.stream) for _ in payloads]
        except EOFError:
            check(False, ("refused", dest, port, D.events("vless.reject", since=mark)))
        c.close_notify()
    return replies, D.wait_event("vless.session", since=mark, timeout=8, cmd="udp")


def direct(dest: str, port: int, payload: bytes) -> bytes:
    """One datagram from a socket connected to dest: a reply from any other address is dropped."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(3)
        u.connect((dest, port))
        u.send(payload)
        return u.recv(65535)


@suite.test
def echo_names_sessions_on_each_local_address():
    for dest in (LAN, "127.0.0.1"):
        mark = D.mark()
        replies, s = through_vless(dest, UDP_PORT, [echo_datagram(b"one"), echo_datagram(b"two")])
        want = f"vless session={s['session']} user=alice"
        check([route_of(r) for r in replies] == [want, want], (dest, replies))
        f = D.wait_event("udp.packet", since=mark, timeout=6, route="vless")
        check(f["vless_session"] == s["session"] and f["packets_in"] == 2 and f["packets_out"] == 2, f)


@suite.test
def direct_datagrams_say_direct_and_come_back_from_their_address():
    for dest in (LAN, "127.0.0.1"):
        check(route_of(direct(dest, UDP_PORT, echo_datagram(b"plain"))) == "direct", dest)


@suite.test
def dns_queries_name_their_session():
    mark = D.mark()
    replies, s = through_vless(LAN, DNS_PORT, [dns_query(7, "a.vlessbench.test")])
    check(replies[0][:2] == b"\x00\x07" and replies[0][3] & 0xf == 0, replies[0][:4])
    q = D.wait_event("dns.query", since=mark, timeout=6, transport="udp")
    check(q["route"] == "vless" and q["vless_session"] == s["session"], q)
    # Direct to the LAN address: answered from it, and named direct.
    mark = D.mark()
    resp = direct(LAN, DNS_PORT, dns_query(8, "b.vlessbench.test"))
    check(resp[:2] == b"\x00\x08", resp[:4])
    # No `a` configured: the answer is the address the query was sent to.
    check(socket.inet_aton(LAN) in resp, resp)
    check(socket.inet_aton("127.0.0.1") in direct("127.0.0.1", DNS_PORT, dns_query(9, "c.vlessbench.test")), "loopback")
    q = D.wait_event("dns.query", since=mark, timeout=6, transport="udp")
    check(q["route"] == "direct", q)


def udp_ask(port: int, payload: bytes, host: str = LAN) -> bytes | None:
    """One datagram to host:port; the reply, or None when the port is closed or nothing came."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(1)
        u.connect((host, port))
        u.send(payload)
        try:
            return u.recv(65535)
        except (ConnectionRefusedError, socket.timeout):
            return None


@suite.test
def reload_opens_updates_and_closes_udp_listeners():
    base = {k: v for k, v in D.cfg.items() if k not in ("udp_target", "dns")}
    port2, dns2 = free_port(), free_port()
    added = dict(base, udp_target=[{"name": "u2", "listen": f"{LAN}:{port2}"}],
                 dns=[{"name": "d2", "listen": f"0.0.0.0:{dns2}"}])
    e = D.reload(added)
    check(e["ok"], e)
    check(udp_ask(UDP_PORT, echo_datagram(b"x")) is None, "the dropped udp_target is closed")
    reply = udp_ask(port2, echo_datagram(b"hello"))
    check(reply is not None and reply.endswith(b"\nVLESSBENCH-UDP u2 direct"), reply)
    resp = udp_ask(dns2, dns_query(9, "x.vlessbench.test"))
    check(resp is not None and resp[3] & 0xf == 0, resp)  # NOERROR in the default zone
    # The same endpoints, new names and zone: updated in place.
    updated = dict(base, udp_target=[{"name": "u3", "listen": f"{LAN}:{port2}"}],
                   dns=[{"name": "d2", "listen": f"0.0.0.0:{dns2}", "zone": "example.test"}])
    e = D.reload(updated)
    check(e["ok"], e)
    check(udp_ask(port2, echo_datagram(b"hi")).endswith(b"\nVLESSBENCH-UDP u3 direct"), "renamed")
    check(udp_ask(dns2, dns_query(10, "x.vlessbench.test"))[3] & 0xf == 5, "REFUSED outside the new zone")
    check(udp_ask(dns2, dns_query(11, "x.example.test"))[3] & 0xf == 0, "NOERROR in it")
    # A port in use: the reload fails, naming the listener, and what runs stays.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as squatter:
        squatter.bind((LAN, 0))
        taken = squatter.getsockname()[1]
        e = D.reload(dict(updated, udp_target=[*updated["udp_target"], {"name": "u4", "listen": f"{LAN}:{taken}"}]))
        check(not e["ok"] and "u4" in e["error"], e)
    check(udp_ask(port2, echo_datagram(b"still")).endswith(b"\nVLESSBENCH-UDP u3 direct"), "kept after the failed reload")
    check(D.reload(base)["ok"])
    check(udp_ask(port2, echo_datagram(b"gone")) is None and udp_ask(dns2, dns_query(12, "x.example.test")) is None, "closed")


try:
    suite.run()
finally:
    D.stop()
