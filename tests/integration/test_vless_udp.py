"""VLESS command 2 (UDP): raw clients framing datagrams by hand, and the real v2ray 4.34 client
(SOCKS5 UDP ASSOCIATE -> its VLESS outbound -> our daemon). Each datagram comes back from an echo
server on loopback; the session's vless.session line counts packets and bytes each way; denied
destinations, oversized and truncated packets and the idle timeout end sessions with a reason."""
import socket
import struct
import threading
import time

from harness import (ANY_PORT, Daemon, Suite, TlsClient, V2ray, check, dns_query, free_port, new_uuid,
                     read_vless_response_header, require_binary, v2ray_socks_config, vless_header)
from harness import read_udp_frame as read_packet
from harness import udp_echo_trailer as trailer
from harness import echo_datagram as pad
from harness import udp_frame as frame

suite = Suite("test_vless_udp")
require_binary()

UUID = new_uuid()
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT}],
    "udp_target": [{"name": "udp", "listen": ANY_PORT}],
    "dns": [{"name": "dns", "listen": ANY_PORT}],
}, limits={"udp_idle_timeout_ms": 1500})
VP = D.port("edge")
UP = D.port("udp")
DNS_PORT = D.port("dns")  # TCP and UDP


class Echo:
    """A plain UDP echo server on loopback (a destination that is not one of the daemon's own)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.peers = set()
        self.stopped = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopped:
            try:
                data, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            self.peers.add(peer)
            try:
                self.sock.sendto(b"echo:" + data, peer)
            except OSError:
                pass

    def stop(self):
        self.stopped = True
        self.thread.join(2)
        self.sock.close()


ECHO = Echo()


def session_line(mark, timeout=8.0):
    return D.wait_event("vless.session", since=mark, timeout=timeout, cmd="udp")


@suite.test
def raw_udp_echo():
    mark = D.mark()
    payloads = [b"", b"x", b"hello", bytes(range(256)) * 4, b"z" * 65502]  # the largest datagram once "echo:" is added
    with TlsClient(VP) as c:
        c.handshake()
        # The header and the first packets in one write; the rest split across writes.
        c.send(vless_header(UUID, ECHO.port, cmd=2) + frame(payloads[0]) + frame(payloads[1]))
        read_vless_response_header(c.stream)
        got = [read_packet(c.stream), read_packet(c.stream)]
        for p in payloads[2:]:
            f = frame(p)
            c.send(f[:1])
            c.send(f[1:])
            got.append(read_packet(c.stream))
        check(got == [b"echo:" + p for p in payloads], [len(g) for g in got])
        c.close_notify()
    e = session_line(mark)
    check(e["dest"] == f"127.0.0.1:{ECHO.port}", e)
    check(e["packets_up"] == len(payloads) and e["packets_down"] == len(payloads), e)
    check(e["bytes_up"] == sum(map(len, payloads)), e)
    check(e["bytes_down"] == sum(len(p) + 5 for p in payloads), e)
    check(e["close_reason"] == "client_eof", e)


@suite.test
def denied_destination():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(vless_header(UUID, 53, addr="192.0.2.1", cmd=2) + frame(b"x"))
        check(c.recv() == b"", "the session closes")
    e = D.wait_event("vless.reject", since=mark)
    check(e["reason"] == "dest_not_allowed" and e["detail"] == "192.0.2.1:53", e)


@suite.test
def idle_timeout_ends_session():
    mark = D.mark()
    t0 = time.monotonic()
    with TlsClient(VP, timeout=10) as c:
        c.handshake()
        c.send(vless_header(UUID, ECHO.port, cmd=2) + frame(b"once"))
        read_vless_response_header(c.stream)
        check(read_packet(c.stream) == b"echo:once")
        check(c.recv() == b"", "closed by the daemon")
    took = time.monotonic() - t0
    e = session_line(mark)
    check(e["close_reason"] == "timeout", e)
    check(1.0 < took < 8.0, took)


@suite.test
def oversized_length():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(vless_header(UUID, ECHO.port, cmd=2) + frame(b"ok"))
        read_vless_response_header(c.stream)
        check(read_packet(c.stream) == b"echo:ok")
        c.send(b"\xff\xff" + b"a" * 100)  # 65535 announced: over the largest datagram
        check(c.recv() == b"", "closed")
    e = session_line(mark)
    check(e["close_reason"] == "udp_packet_too_large" and e["packets_up"] == 1, e)


@suite.test
def truncated_packet():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(vless_header(UUID, ECHO.port, cmd=2) + b"\x00\x10abc")
        c.close_notify()
        c.recv()
    e = session_line(mark)
    check(e["close_reason"] == "udp_truncated_packet" and e["packets_up"] == 0, e)


@suite.test
def udp_target_names_the_session():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(vless_header(UUID, UP, cmd=2) + frame(pad(b"one")) + frame(pad(b"two")) + frame(pad(b"three")))
        read_vless_response_header(c.stream)
        echoes = [trailer(read_packet(c.stream)) for _ in range(3)]
        # Direct, while the session is alive: the same target says direct.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.settimeout(5)
            u.sendto(pad(b"plain"), ("127.0.0.1", UP))
            direct, _ = u.recvfrom(65535)
            direct_port = u.getsockname()[1]
        c.close_notify()
    e = session_line(mark)
    want = f"vless session={e['session']} user=alice"
    check(echoes == [(p, "udp", want) for p in (b"one", b"two", b"three")], echoes)
    check(trailer(direct) == (b"plain", "udp", "direct"), direct)
    # One udp.packet line per flow, once it has been idle for udp_idle_timeout_ms.
    f = D.wait_event("udp.packet", since=mark, timeout=6, route="vless")
    check(f["vless_session"] == e["session"] and f["packets_in"] == 3 and f["packets_out"] == 3, f)
    # Each datagram with its room for the trailer; the echo never longer than what it was sent.
    check(f["bytes_in"] == len(pad(b"one") + pad(b"two") + pad(b"three")) == f["bytes_out"], f)
    check(f["close_reason"] == "idle", f)
    g = D.wait_event("udp.packet", since=mark, timeout=6, peer=f"127.0.0.1:{direct_port}")
    check(g["route"] == "direct" and g["packets_in"] == 1, g)
    check(len(D.events("udp.packet", since=mark)) == 2, D.events("udp.packet", since=mark))


def dns_answer(resp: bytes) -> tuple[int, int, list[bytes]]:
    """(id, rcode, rdata of every answer) of a response to one question."""
    qid, flags, qd, an = struct.unpack(">HHHH", resp[:8])
    check(flags & 0x8000, "a response")
    at = 12
    for _ in range(qd):
        while resp[at] != 0:
            at += 1 + resp[at]
        at += 5
    out = []
    for _ in range(an):
        check(resp[at:at + 2] == b"\xc0\x0c", resp[at:at + 2])
        (rdlen,) = struct.unpack(">H", resp[at + 10:at + 12])
        out.append(resp[at + 12:at + 12 + rdlen])
        at += 12 + rdlen
    return qid, flags & 0xf, out


def udp_ask(message: bytes, timeout: float = 5.0) -> tuple[bytes, int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(timeout)
        u.sendto(message, ("127.0.0.1", DNS_PORT))
        data, _ = u.recvfrom(65535)
        return data, u.getsockname()[1]


@suite.test
def dns_direct_udp_and_tcp():
    mark = D.mark()
    resp, port = udp_ask(dns_query(7, "Host.vlessbench.test"))
    check(dns_answer(resp) == (7, 0, [bytes([127, 0, 0, 1])]), resp)
    e = D.wait_event("dns.query", since=mark, peer=f"127.0.0.1:{port}")
    check(e["route"] == "direct" and e["transport"] == "udp" and e["name"] == "host.vlessbench.test", e)
    check(e["rcode"] == "NOERROR" and e["qtype"] == 1, e)
    resp, _ = udp_ask(dns_query(8, "example.com"))
    check(dns_answer(resp)[:2] == (8, 5), resp)  # REFUSED
    with socket.create_connection(("127.0.0.1", DNS_PORT), timeout=5) as t:
        q = dns_query(9, "v6.vlessbench.test", 28)
        t.sendall(struct.pack(">H", len(q)) + q)
        (n,) = struct.unpack(">H", t.recv(2))
        resp = b""
        while len(resp) < n:
            resp += t.recv(n - len(resp))
    check(dns_answer(resp) == (9, 0, [socket.inet_pton(socket.AF_INET6, "::1")]), resp)
    e = D.wait_event("dns.query", since=mark, transport="tcp")
    check(e["qtype"] == 28 and e["route"] == "direct", e)


@suite.test
def dns_delay_and_hostile():
    mark = D.mark()
    t0 = time.monotonic()
    resp, _ = udp_ask(dns_query(10, "a.delay-300.vlessbench.test"))
    took = time.monotonic() - t0
    check(dns_answer(resp)[:2] == (10, 0) and took >= 0.25, took)
    e = D.wait_event("dns.query", since=mark, delay_ms=300)
    # A compression loop and a truncated header: FORMERR with the parser's reason, never a hang.
    loop = struct.pack(">HHHHHH", 11, 0x0100, 1, 0, 0, 0) + bytes([1, 97, 0xC0, 12, 0, 1, 0, 1])
    resp, _ = udp_ask(loop)
    check(resp[:4] == struct.pack(">HH", 11, 0x8401), resp)
    check(D.wait_event("dns.query", since=mark, error="pointer_loop")["rcode"] == "FORMERR")
    resp, _ = udp_ask(b"\x00\x0c\x01")
    check(resp[:4] == struct.pack(">HH", 12, 0x8401), resp)
    D.wait_event("dns.query", since=mark, error="short_header")


@suite.test
def dns_through_vless():
    mark = D.mark()
    with TlsClient(VP) as c:
        c.handshake()
        c.send(vless_header(UUID, DNS_PORT, cmd=2) + frame(dns_query(21, "through.vlessbench.test")))
        read_vless_response_header(c.stream)
        check(dns_answer(read_packet(c.stream)) == (21, 0, [bytes([127, 0, 0, 1])]))
        q = D.wait_event("dns.query", since=mark, name="through.vlessbench.test")
        c.close_notify()
    e = session_line(mark)
    check(q["route"] == "vless" and q["vless_session"] == e["session"] and q["vless_user"] == "alice", q)


def socks5_udp_associate(port: int):
    """A SOCKS5 UDP ASSOCIATE (RFC 1928): the TCP control connection and the relay's address."""
    ctl = socket.create_connection(("127.0.0.1", port), timeout=5)
    ctl.sendall(b"\x05\x01\x00")
    check(ctl.recv(2) == b"\x05\x00")
    ctl.sendall(b"\x05\x03\x00\x01" + bytes(4) + bytes(2))
    head = ctl.recv(4)
    check(head[:2] == b"\x05\x00", head)
    addr = socket.inet_ntoa(ctl.recv(4)) if head[3] == 1 else None
    (rport,) = struct.unpack(">H", ctl.recv(2))
    return ctl, ("127.0.0.1" if addr in (None, "0.0.0.0") else addr, rport)


def socks5_udp(dest_port: int, data: bytes) -> bytes:
    return b"\x00\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", dest_port) + data


@suite.test
def v2ray_socks_udp():
    socks_port = free_port(proto="tcp+udp")
    cfg = v2ray_socks_config(socks_port, VP, UUID)
    mark = D.mark()
    count = 1000
    with V2ray(cfg, socks_port):
        ctl, relay = socks5_udp_associate(socks_port)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        got = []
        try:
            # One datagram at a time: none may be lost on loopback.
            for i in range(count):
                u.sendto(socks5_udp(UP, pad(b"n%d" % i)), relay)
                data, _ = u.recvfrom(65535)
                check(data[:10] == socks5_udp(UP, b""), data[:10])
                got.append(trailer(data[10:]))
            # What `nc -u` sends from an app behind a client's TUN: no room for the trailer. Relayed by
            # the VLESS session, it is answered whole with the trailer appended (no reflection there).
            tiny = []
            for datagram in (b"hi\n", b"x"):
                u.sendto(socks5_udp(UP, datagram), relay)
                data, _ = u.recvfrom(65535)
                tiny.append(data[10:])
        finally:
            u.close()
            ctl.close()
        e = session_line(mark, timeout=10)
    check(e["user"] == "alice" and e["dest"] == f"127.0.0.1:{UP}", e)
    check(e["packets_up"] == count + 2 and e["packets_down"] == count + 2, e)
    want = f"vless session={e['session']} user=alice"
    check(got == [(b"n%d" % i, "udp", want) for i in range(count)], got[:3])
    check(tiny == [b"hi\n\nVLESSBENCH-UDP udp " + want.encode(), b"x\nVLESSBENCH-UDP udp " + want.encode()], tiny)


@suite.test
def v2ray_socks_dns():
    socks_port = free_port(proto="tcp+udp")
    cfg = v2ray_socks_config(socks_port, VP, UUID)
    mark = D.mark()
    with V2ray(cfg, socks_port):
        ctl, relay = socks5_udp_associate(socks_port)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        try:
            for i in range(20):
                u.sendto(socks5_udp(DNS_PORT, dns_query(100 + i, f"q{i}.vlessbench.test")), relay)
                data, _ = u.recvfrom(65535)
                check(dns_answer(data[10:]) == (100 + i, 0, [bytes([127, 0, 0, 1])]), data)
        finally:
            u.close()
            ctl.close()
        e = session_line(mark, timeout=10)
    qs = D.events("dns.query", since=mark)
    check(len(qs) == 20 and all(q["route"] == "vless" and q["vless_session"] == e["session"] for q in qs), qs)


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        ECHO.stop()
        D.stop()
