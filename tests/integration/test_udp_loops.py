"""Issue 23, item 4: one spoofed datagram must not start a loop between the UDP echo, the DNS
responder, the echo itself and a second install's. In a network namespace of the test's own, a raw
socket (IP_HDRINCL) forges one datagram whose source is the other service's endpoint; after a
bounded wait the access log and a plain echo show at most a handful of answers and a daemon that
still serves. Skipped (77) without root (namespace, raw socket)."""
import socket
import struct
import time

from harness import Daemon, Suite, check, dns_query, free_port, require_binary, run_in_own_netns

run_in_own_netns()

suite = Suite("test_udp_loops")
require_binary()

HOST = "127.0.0.1"
WAIT = 2.0  # a loop on today's main writes tens of thousands of lines in this time


def install() -> tuple[Daemon, int, int]:
    udp, dns = free_port(), free_port()
    d = Daemon({
        "users": [],
        "target": [{"name": "http", "listen": f"{HOST}:{free_port()}"}],
        "udp_target": [{"name": "udp", "listen": f"{HOST}:{udp}"}],
        "dns": [{"name": "dns", "listen": f"{HOST}:{dns}"}],
    }, limits={"udp_idle_timeout_ms": 500})
    return d, udp, dns


def spoof(src_port: int, dst_port: int, payload: bytes) -> None:
    """One IPv4/UDP datagram from HOST:src_port to HOST:dst_port (UDP checksum 0: none)."""
    udp = struct.pack(">HHHH", src_port, dst_port, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(HOST), socket.inet_aton(HOST))
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as r:
        r.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        r.sendto(ip + udp, (HOST, dst_port))


def echo_works(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(3)
        u.sendto(b"still-there" + b"." * 200, (HOST, port))
        try:
            return u.recv(65535).startswith(b"still-there")
        except OSError:
            return False


def packets_from(d: Daemon, port: int) -> int:
    """Datagrams the echo took from HOST:port (its flow lines: idle 500 ms, or stop)."""
    return sum(e.get("packets_in", 0) for e in d.events("udp.packet") if e.get("peer") == f"{HOST}:{port}")


@suite.test
def echo_and_dns_of_one_install():
    d, udp, dns = install()
    with d:
        spoof(dns, udp, b"x" * 64)  # to the echo, "from" the DNS responder
        spoof(udp, dns, dns_query(7, "a.vlessbench.test"))  # to DNS, "from" the echo
        time.sleep(WAIT)
        queries = len(d.events("dns.query"))
        check(queries <= 4, f"echo <-> dns: {queries} dns.query lines in {WAIT} s")
        check(echo_works(udp), "the echo does not answer after the spoofed datagrams")
        d.stop()
        n = packets_from(d, dns)
        check(n <= 4, f"echo <-> dns: the echo took {n} datagrams from the DNS port")


@suite.test
def echo_and_itself():
    d, udp, _ = install()
    with d:
        spoof(udp, udp, b"x" * 64)
        time.sleep(WAIT)
        check(echo_works(udp), "the echo froze after a datagram from itself")
        rc = d.stop(timeout=5)
        check(rc == 0, f"echo <-> itself: the daemon did not stop on SIGTERM (rc {rc})")
        n = packets_from(d, udp)
        check(n <= 4, f"echo <-> itself: {n} datagrams")


@suite.test
def dns_response_gets_no_answer():
    d, _, dns = install()
    with d, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(1)
        q = bytearray(dns_query(9, "a.vlessbench.test"))
        q[2] |= 0x80  # QR: a response
        u.sendto(bytes(q), (HOST, dns))
        try:
            got = u.recv(65535)
        except OSError:
            got = None
        check(got is None, f"a DNS response was answered: {got!r}")


@suite.test
def two_installs():
    a, a_udp, a_dns = install()
    b, b_udp, b_dns = install()
    with a, b:
        spoof(b_udp, a_udp, b"x" * 64)  # echo <-> echo
        spoof(b_dns, a_dns, dns_query(5, "a.vlessbench.test"))  # dns <-> dns
        spoof(b_dns, a_udp, dns_query(6, "a.vlessbench.test"))  # echo <-> the other's dns
        time.sleep(WAIT)
        queries = len(a.events("dns.query")) + len(b.events("dns.query"))
        check(queries <= 6, f"two installs: {queries} dns.query lines in {WAIT} s")
        check(echo_works(a_udp) and echo_works(b_udp), "an echo stopped answering")
        a.stop()
        b.stop()
        n = packets_from(a, b_udp) + packets_from(b, a_udp)
        check(n <= 6, f"two installs, echo <-> echo: {n} datagrams")


if __name__ == "__main__":
    suite.run()
