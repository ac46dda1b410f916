#!/usr/bin/env python3
"""The UDP probes clients ship (issue 43): the [[udp_target]] modes "ntp" and "stun", and tiny
datagrams through a client's UDP relay to the echo. One daemon serves every case.

- Direct: an NTP v3 query (v2rayN's) gets a 48-byte server-mode answer with the daemon's clock and
  its transmit time as origin; a STUN Binding request gets XOR-MAPPED-ADDRESS = the source and
  SOFTWARE naming the route, never longer than the request (a bare 20-byte one gets nothing, a padded
  one its answer); hostile or foreign packets (an NTP server packet, RFC 3489's classic STUN, a
  CHANGE-REQUEST) are not answered and are counted in udp.refused with the parser's reason.
- Through the real Xray's SOCKS5 UDP -> VLESS (entry from `vlessbenchd links`): the same NTP query and
  a bare 20-byte Binding request (relayed: no size bound) are answered, STUN's SOFTWARE names the
  VLESS session, and each target's udp.packet line names the same session; a 3-byte datagram to the
  echo comes back whole with the full trailer appended, naming the session.
A missing Xray is a SKIP of that case."""
from __future__ import annotations

import socket
import struct
import time

import harness as h
from harness import LOOPBACK, check, peers

suite = h.Suite("test_udp_probes")
h.require_binary()
USER = "tester"
D = h.Daemon({
    "users": [{"name": USER, "uuid": h.new_uuid()}],
    "vless": [{"name": "tls", "listen": f"{LOOPBACK}:{h.free_port()}"}],
    "target": [{"name": "http", "listen": h.ANY_PORT}],
    "udp_target": [{"name": "echo", "listen": h.ANY_PORT},
                   {"name": "ntp", "listen": h.ANY_PORT, "mode": "ntp"},
                   {"name": "stun", "listen": h.ANY_PORT, "mode": "stun"}],
}, limits={"udp_idle_timeout_ms": 1000})  # flows are logged when idle
NTP, STUN, ECHO = D.port("ntp"), D.port("stun"), D.port("echo")
COOKIE = 0x2112A442
NTP_QUERY = b"\x1b" + bytes(47)  # v2rayN's: LI 0, version 3, mode 3


def stun_request(tid: bytes, size: int = 20) -> bytes:
    """A Binding request, padded with a PADDING attribute to size bytes (room for a direct answer)."""
    body = b"" if size <= 20 else struct.pack(">HH", 0x0026, size - 24) + bytes(size - 24)
    return struct.pack(">HHI", 1, len(body), COOKIE) + tid + body


def stun_answer(data: bytes) -> tuple[bytes, tuple[str, int], str]:
    """(transaction id, XOR-MAPPED-ADDRESS, SOFTWARE) of a Binding success response."""
    mtype, length, cookie = struct.unpack(">HHI", data[:8])
    check(mtype == 0x0101 and cookie == COOKIE and length == len(data) - 20, data[:20])
    tid, at, mapped, software = data[8:20], 20, None, ""
    while at + 4 <= len(data):
        atype, alen = struct.unpack(">HH", data[at:at + 4])
        value = data[at + 4:at + 4 + alen]
        if atype == 0x0020 and value[1] == 1:
            port = struct.unpack(">H", value[2:4])[0] ^ (COOKIE >> 16)
            addr = bytes(a ^ b for a, b in zip(value[4:8], struct.pack(">I", COOKIE)))
            mapped = (socket.inet_ntoa(addr), port)
        elif atype == 0x8022:
            software = value.decode()
        at += 4 + (alen + 3) // 4 * 4
    check(mapped is not None, data)
    return tid, mapped, software


def ntp_answer(data: bytes, query: bytes) -> float:
    """Checks a server-mode answer to query; returns its transmit time as Unix seconds."""
    check(len(data) == 48, len(data))
    check(data[0] & 7 == 4 and (data[0] >> 3) & 7 == (query[0] >> 3) & 7, data[:4])
    check(data[24:32] == query[40:48], "origin is not the query's transmit time")
    secs, frac = struct.unpack(">II", data[40:48])
    return secs - 2_208_988_800 + frac / 2**32


@suite.test
def direct_ntp_and_stun():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.bind((LOOPBACK, 0))
        me = u.getsockname()
        mark = D.mark()
        q = NTP_QUERY[:40] + struct.pack(">II", 3_900_000_000, 12345)
        u.sendto(q, (LOOPBACK, NTP))
        data, _ = u.recvfrom(2048)
        check(abs(ntp_answer(data, q) - time.time()) < 5, "the daemon's clock")
        # A bare Binding request has no room for the answer: nothing; a padded one gets it, whole.
        u.sendto(stun_request(b"A" * 12), (LOOPBACK, STUN))
        padded = stun_request(b"B" * 12, 96)
        u.sendto(padded, (LOOPBACK, STUN))
        data, _ = u.recvfrom(2048)
        tid, mapped, software = stun_answer(data)
        check(tid == b"B" * 12 and mapped == me and software == "vlessbench stun direct", (tid, mapped, software))
        check(len(data) <= len(padded), len(data))
        # Foreign and hostile packets: no answer (the sentinel's comes first), each refusal logged.
        bad = [(NTP, b"\x24" + bytes(47)), (NTP, b"\x1b" * 20),
               (STUN, struct.pack(">HH", 1, 0) + bytes(16)),
               (STUN, struct.pack(">HHI", 1, 8, COOKIE) + b"C" * 12 + struct.pack(">HHI", 3, 4, 6))]
        for port, datagram in bad:
            u.sendto(datagram, (LOOPBACK, port))
        u.sendto(stun_request(b"D" * 12, 96), (LOOPBACK, STUN))
        data, _ = u.recvfrom(2048)
        check(stun_answer(data)[0] == b"D" * 12, data[:20])
    reasons = set()
    deadline = time.monotonic() + 5
    while len(reasons) < 4 and time.monotonic() < deadline:
        reasons = {e["reason"] for e in D.events("udp.refused", since=mark)}
        time.sleep(0.1)
    for part in ("ntp: a server", "ntp: shorter", "stun: no magic cookie", "stun: CHANGE-REQUEST"):
        check(any(r.startswith(part) for r in reasons), (part, reasons))
    flow = D.wait_event("udp.packet", since=mark, timeout=8, listener="stun", peer=f"{me[0]}:{me[1]}")
    check(flow["route"] == "direct" and flow["bytes_out"] <= flow["bytes_in"], flow)


def xray_socks() -> tuple[peers.Core, int]:
    entry, socks = peers.inbound_port(), peers.inbound_port()
    while socks == entry:
        socks = peers.inbound_port()
    text, suffix = peers.core_config("xray", peers.links_text(D), f"tls-{USER}", entry, socks)
    return peers.Core("xray", text, [entry, socks], suffix=suffix), socks


def socks_ask(u, relay, port: int, datagram: bytes) -> bytes:
    u.sendto(h.socks5_udp_header(port) + datagram, relay)
    data, _ = u.recvfrom(65535)
    check(data[:3] == b"\0\0\0" and data[3] == 1, data[:16])
    return data[10:]


@suite.test
def through_xray_socks5_udp():
    peers.require("xray")
    core, socks = xray_socks()
    mark = D.mark()
    try:
        ctl, relay = h.socks5_udp_associate(socks)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.settimeout(5)
            ntp = socks_ask(u, relay, NTP, NTP_QUERY)
            stun = socks_ask(u, relay, STUN, stun_request(b"E" * 12))
            tiny = socks_ask(u, relay, ECHO, b"hi\n")
        ctl.close()
    except Exception as e:  # noqa: BLE001 - with the core's output
        raise AssertionError(f"xray: {e}\n--- xray output ---\n{core.output()[-1500:]}") from None
    finally:
        core.stop()
    ntp_answer(ntp, NTP_QUERY)
    tid, _, software = stun_answer(stun)
    check(tid == b"E" * 12 and software.startswith("vlessbench stun vless session="), software)
    session = int(software.split("session=")[1].split()[0])
    # Xray's UDP over VLESS: one session per destination, or one carrying them all (XUDP).
    sessions = {session}
    check(tiny.startswith(b"hi\n\nVLESSBENCH-UDP echo vless session="), tiny)
    sessions.add(int(tiny.split(b"session=")[1].split()[0]))
    for name in ("ntp", "stun", "echo"):
        f = D.wait_event("udp.packet", since=mark, timeout=8, listener=name, route="vless")
        check(f["packets_out"] == 1 and f.get("unanswered", 0) == 0, f)
        if name == "stun":
            check(f["vless_session"] == session, (f, session))
    print(f"FIGURE xray_udp_probe_sessions = {len(sessions)}")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
