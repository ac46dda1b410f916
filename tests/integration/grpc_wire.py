"""A hand-built gRPC-over-h2c client's bytes, for the tests that speak to the gRPC listener below
any real client (test_grpc_transport, test_grpc_hostile, test_budget): HTTP/2 frames, the one
request HEADERS block the daemon's gun transport accepts, and gun's Hunk messages
(gRPC PROTOCOL-HTTP2.md framing around protobuf `Hunk { bytes data = 1; }`)."""
from __future__ import annotations

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8


def varint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def hunk(data: bytes) -> bytes:
    """A gRPC message carrying Hunk{data}."""
    body = b"\x0a" + varint(len(data)) + data
    return b"\x00" + struct.pack(">I", len(body)) + body


def unhunk(wire: bytes) -> bytes:
    """The data of a series of Hunk messages."""
    out, at = b"", 0
    while at < len(wire):
        if wire[at] != 0:
            raise AssertionError(f"compressed flag {wire[at]}")
        (n,) = struct.unpack(">I", wire[at + 1:at + 5])
        msg, at = wire[at + 5:at + 5 + n], at + 5 + n
        pos = 0
        while pos < len(msg):
            if msg[pos] != 0x0A:
                raise AssertionError(f"tag {msg[pos]:#x}")
            pos += 1
            ln, shift = 0, 0
            while True:
                b = msg[pos]
                pos += 1
                ln |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            out += msg[pos:pos + ln]
            pos += ln
    return out


def h2frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def request_block(path: str = "/vlessbench/Tun") -> bytes:
    """HPACK: :method POST, :scheme http, :path, :authority, content-type application/grpc."""
    def lit(prefix: bytes, value: str) -> bytes:
        return prefix + bytes([len(value)]) + value.encode()
    return b"\x83\x86" + lit(b"\x04", path) + lit(b"\x01", "localhost") + lit(b"\x0f\x10", "application/grpc")
