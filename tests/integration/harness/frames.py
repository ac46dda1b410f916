"""Bytes on the wire, built and read: the VLESS request and response headers, WebSocket, Mux.Cool
and VLESS UDP frames, the [[udp_target]] echo's trailer, DNS queries, the route a relayed answer
names. Pure: no sockets (a reader takes a clients.Stream)."""
from __future__ import annotations

import os
import socket
import struct
import uuid as uuidlib
from typing import TYPE_CHECKING

from .checks import check
from .env import LOOPBACK

if TYPE_CHECKING:
    from .clients import Stream

ATYP_V4, ATYP_DOMAIN, ATYP_V6 = 1, 2, 3


def addons_flow(flow: str) -> bytes:
    raw = flow.encode()
    return bytes([0x0A, len(raw)]) + raw


def vless_header(user_uuid: str, port: int, addr: str = LOOPBACK, atyp: int | None = None, cmd: int = 1,
                 version: int = 0, addons: bytes = b"") -> bytes:
    u = uuidlib.UUID(user_uuid).bytes
    out = bytes([version]) + u + bytes([len(addons)]) + addons + bytes([cmd])
    if cmd == 3:  # Mux: no address on the wire
        return out
    if atyp is None:
        atyp = ATYP_V6 if ":" in addr else (ATYP_V4 if addr.replace(".", "").isdigit() else ATYP_DOMAIN)
    out += struct.pack(">H", port) + bytes([atyp])
    if atyp == ATYP_V4:
        out += socket.inet_pton(socket.AF_INET, addr)
    elif atyp == ATYP_V6:
        out += socket.inet_pton(socket.AF_INET6, addr)
    elif atyp == ATYP_DOMAIN:
        raw = addr.encode()
        out += bytes([len(raw)]) + raw
    return out


def read_vless_response_header(stream: Stream) -> None:
    ver, alen = stream.read_exact(2)
    assert ver == 0, f"VLESS response version {ver}"
    stream.read_exact(alen)


# VLESS UDP (command 2) and the daemon's UDP targets

UDP_ECHO_MARKER = b"\nVLESSBENCH-UDP "
# The echo is never longer than the datagram (docs/target.md "No amplifier"): its trailer takes the
# place of the datagram's last bytes, so a datagram leaves room for it (core/wire/route_header.hpp
# udp_echo_room). The room is NUL bytes, which udp_echo_trailer drops from the payload it returns.
UDP_ECHO_ROOM = 256


def echo_datagram(payload: bytes) -> bytes:
    """payload as a datagram for the [[udp_target]] echo: with room for its route trailer."""
    return payload + b"\0" * UDP_ECHO_ROOM


def ws_frame(op: int, payload: bytes, fin: bool = True, mask: bool = True) -> bytes:
    """One RFC 6455 frame as a client sends it (masked unless mask=False)."""
    head = bytes([(0x80 if fin else 0) | op])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack(">H", n)
    else:
        head += bytes([m | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_ws_frame(stream: Stream) -> tuple[int, bytes]:
    """(opcode, payload) of the next frame from a server (which never masks)."""
    b0, b1 = stream.read_exact(2)
    check(b1 & 0x80 == 0, "server frames are not masked")
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", stream.read_exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", stream.read_exact(8))[0]
    return b0 & 0x0F, stream.read_exact(n)


def read_mux_frame(stream: "Stream") -> tuple[int, int, int, bytes, bytes]:
    """(id, status, option, extra metadata, data) of the next Mux.Cool frame on stream."""
    (mlen,) = struct.unpack(">H", stream.read_exact(2))
    meta = stream.read_exact(mlen)
    sid, st, opt = struct.unpack(">HBB", meta[:4])
    data = b""
    if opt & 1:
        (n,) = struct.unpack(">H", stream.read_exact(2))
        data = stream.read_exact(n)
    return sid, st, opt, meta[4:], data


def udp_frame(data: bytes) -> bytes:
    """One datagram as a VLESS UDP session carries it: 2-byte big-endian length, then the bytes."""
    return struct.pack(">H", len(data)) + data


def read_udp_frame(stream: Stream) -> bytes:
    (n,) = struct.unpack(">H", stream.read_exact(2))
    return stream.read_exact(n)


def udp_echo_trailer(echo: bytes) -> tuple[bytes, str, str]:
    """(payload, listener, route) of a [[udp_target]] echo (core/wire/route_header.hpp, format_udp_echo)
    of an echo_datagram: the payload without what is left of the room."""
    at = echo.rfind(UDP_ECHO_MARKER)
    check(at >= 0, echo[-80:])
    listener, _, route = echo[at + len(UDP_ECHO_MARKER):].decode().partition(" ")
    return echo[:at].rstrip(b"\0"), listener, route


def dns_query(qid: int, name: str, qtype: int = 1) -> bytes:
    """A DNS query (RD set) for name, type qtype (1 = A), class IN."""
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)



# The route a relayed answer names (issue 27 item 8: it was parsed in several test files).

def parse_route(route: str) -> dict:
    """The route a relayed answer names (X-Vlessbench-Route, the UDP echo's trailer, the DNS TXT
    record; core/wire/route_header.hpp): "direct" -> {"route": "direct"}; "vless session=ID
    [sub=N] user=NAME [transport=T]" -> {"route": "vless", "session": ID, "sub": N or None,
    "user": NAME, ...every other key=value as text}. Anything else fails the test."""
    kind, *fields = route.split()
    check(kind in ("vless", "direct"), f"not a route: {route!r}")
    out: dict = {"route": kind}
    if kind == "direct":
        check(not fields, f"not a route: {route!r}")
        return out
    for field in fields:
        key, eq, value = field.partition("=")
        check(eq == "=" and key and key not in out, f"not a route: {route!r}")
        out[key] = value
    check("session" in out and out["session"].isdigit(), f"no session id in route {route!r}")
    out["session"] = int(out["session"])
    out["sub"] = int(out["sub"]) if "sub" in out else None
    return out


def route_session(route: str) -> int:
    """The VLESS session id a route names ("vless session=ID ..."); a direct route fails the test."""
    r = parse_route(route)
    check(r["route"] == "vless", f"route {route!r} is not a VLESS session")
    return r["session"]


