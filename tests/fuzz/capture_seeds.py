#!/usr/bin/env python3
"""Regenerates the capture-based fuzz seeds: what real clients send, recorded on loopback.

    python3 tests/fuzz/capture_seeds.py [--out tests/fuzz/corpus] [--peers DIR] [--only NAME...]

Each real VLESS client (v2ray 4.34 from PATH; xray, sing-box, mihomo from --peers, else
$VLESSBENCH_PEERS, else ../shared/peers beside the checkout, else PATH) runs with a SOCKS5 (or
mixed) inbound and a VLESS outbound pointed at a recorder: a TLS terminator with a self-signed
certificate (openssl CLI) in front of a byte recorder, on 127.0.0.1. The script drives each client
through its inbound (a TCP CONNECT with an HTTP request, a UDP ASSOCIATE with a DNS query), and
the recorder keeps what arrives, decoding the transport (WebSocket frames, HTTPUpgrade, gRPC over
h2) until the request it was driven with shows up. It answers where a client needs an answer to
go on (the 101, h2 SETTINGS and response HEADERS, the VLESS response header and one UDP packet
back, whose SOCKS5 UDP header the client then sends to us). `dig` (bind9-dnsutils) gives the DNS
queries. Nothing leaves loopback; every wait is bounded.

Seeds are written as corpus/TARGET/cap-ORIGIN-WHAT (ORIGIN = client and version); a run first
deletes the cap-* files of the clients it captures, so the set is exactly what this script makes.
A client that is missing is reported and skipped; a case that fails (after three tries) keeps its
earlier seeds and makes the exit status 1. CAPTURE_DEBUG=1 names each connection the recorder
accepts. Targets fed: client_hello (the ClientHello
body), vless_header (request header + first payload), mux_frame (Mux.Cool / XUDP frames after the
header), udp_packet (VLESS UDP framing after the header), ws_upgrade (the upgrade head), ws_frame
(the client's masked frames), gun_message (gRPC messages from the h2 DATA frames), socks5_udp (the
client's SOCKS5 UDP reply header), dns_query (dig over UDP and TCP)."""
import argparse
import base64
import hashlib
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
UUID = "b831381d-6324-4d53-ad4f-8cda48b30811"  # the unit tests' and the hand-written seeds' user
DOMAIN = "target.vlessbench.test"
HTTP_PAYLOAD = f"GET /capture HTTP/1.1\r\nHost: {DOMAIN}\r\nUser-Agent: capture\r\n\r\n".encode()
TIMEOUT = 10.0


def dns_query(qid: int, name: str, qtype: int = 1) -> bytes:
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", qtype, 1)


DNS_PAYLOAD = dns_query(0x5eed, "a.vlessbench.test")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what}: port {port} not open within {TIMEOUT} s")


# --------------------------------------------------------------------------------------------
# Decoders of what the recorder receives


def vless_split(data: bytes):
    """(header, rest, cmd) of a VLESS request, or None while incomplete."""
    if len(data) < 18:
        return None
    n = 18 + data[17]
    if len(data) < n + 1:
        return None
    cmd = data[n]
    n += 1
    if cmd == 3:  # Mux: no address follows (v1.mux.cool is implied)
        return data[:n], data[n:], cmd
    if len(data) < n + 3:
        return None
    atyp = data[n + 2]
    n += 3
    if atyp == 1:
        n += 4
    elif atyp == 3:
        n += 16
    elif atyp == 2:
        if len(data) < n + 1:
            return None
        n += 1 + data[n]
    else:
        return data[:n], data[n:], cmd
    if len(data) < n:
        return None
    return data[:n], data[n:], cmd


def mux_frames(data: bytes) -> list[bytes]:
    """Whole Mux.Cool frames at the start of data (meta length, meta, optional data)."""
    out, pos = [], 0
    while pos + 2 <= len(data):
        ml = struct.unpack(">H", data[pos:pos + 2])[0]
        if pos + 2 + ml > len(data) or ml < 4:
            break
        opt = data[pos + 2 + 3]
        end = pos + 2 + ml
        if opt & 1:
            if end + 2 > len(data):
                break
            end += 2 + struct.unpack(">H", data[end:end + 2])[0]
            if end > len(data):
                break
        out.append(data[pos:end])
        pos = end
    return out


def ws_frames(data: bytes):
    """(raw frames, unmasked payload) of the whole WebSocket frames at the start of data."""
    frames, payload, pos = [], b"", 0
    while pos + 2 <= len(data):
        b1 = data[pos + 1]
        n, hl = b1 & 0x7F, 2
        if n == 126:
            if pos + 4 > len(data):
                break
            n, hl = struct.unpack(">H", data[pos + 2:pos + 4])[0], 4
        elif n == 127:
            if pos + 10 > len(data):
                break
            n, hl = struct.unpack(">Q", data[pos + 2:pos + 10])[0], 10
        mask = b""
        if b1 & 0x80:
            mask = data[pos + hl:pos + hl + 4]
            hl += 4
        if pos + hl + n > len(data):
            break
        body = data[pos + hl:pos + hl + n]
        if mask:
            body = bytes(c ^ mask[i % 4] for i, c in enumerate(body))
        frames.append(data[pos:pos + hl + n])
        payload += body
        pos += hl + n
    return frames, payload


def varint(data: bytes, pos: int):
    v = shift = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
    raise ValueError("truncated varint")


def gun_payload(msg: bytes) -> bytes:
    """The bytes a gRPC (gun) message carries: Hunk/MultiHunk field 1, length-delimited."""
    out, pos, body = b"", 0, msg[5:]
    try:
        while pos < len(body):
            key, pos = varint(body, pos)
            if key & 7 != 2:
                break
            n, pos = varint(body, pos)
            if key >> 3 == 1:
                out += body[pos:pos + n]
            pos += n
    except ValueError:
        pass
    return out


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


# --------------------------------------------------------------------------------------------
# The recorder


class Recorder:
    """A TLS listener on 127.0.0.1 that records one connection (or more, for UDP over mux)."""

    def __init__(self, cert: Path, key: Path, mode: str, alpn=("http/1.1",), marker: bytes = HTTP_PAYLOAD,
                 reply_udp: bool = False):
        self.mode, self.marker, self.reply_udp = mode, marker, reply_udp
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(list(alpn))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(TIMEOUT)
        self.port = self.sock.getsockname()[1]
        self.got: dict = {}
        self.error = ""
        self.stage = "waiting for a connection"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self._serve()
        except Exception as e:  # noqa: BLE001 - reported by the caller, with what was recorded
            self.error = f"{type(e).__name__} while {self.stage}: {e}"
        finally:
            self.done.set()

    def _serve(self):
        deadline = time.monotonic() + 2 * TIMEOUT
        while time.monotonic() < deadline:
            self.stage = "waiting for a connection"
            raw, _ = self.sock.accept()
            raw.settimeout(TIMEOUT)
            self.stage = "reading the ClientHello"
            hello = self._peek_client_hello(raw)
            if os.environ.get("CAPTURE_DEBUG"):
                print(f"  recorder :{self.port}: connection, hello {len(hello)} B", file=sys.stderr)
            if not hello:  # a client's probe or a connection it dropped: wait for the next
                raw.close()
                continue
            self.got["client_hello"] = hello
            self.stage = "in the TLS handshake"
            tls = self.ctx.wrap_socket(raw, server_side=True)
            self.stage = "reading the request"
            try:
                if self._session(tls):
                    return
            finally:
                tls.close()
        raise TimeoutError("no connection carried the request")

    @staticmethod
    def _peek_client_hello(raw: socket.socket) -> bytes:
        deadline = time.monotonic() + TIMEOUT
        data = b""
        while time.monotonic() < deadline:
            data = raw.recv(1 << 16, socket.MSG_PEEK)
            if not data:
                return b""
            if len(data) >= 9 and len(data) >= 5 + struct.unpack(">H", data[3:5])[0]:
                n = int.from_bytes(data[6:9], "big")
                return data[9:9 + n]
            time.sleep(0.01)
        return b""

    def _recv(self, tls) -> bytes:
        data = tls.recv(1 << 16)
        if not data:
            raise EOFError("the client closed before the request arrived")
        return data

    def _session(self, tls) -> bool:
        """Reads one connection until the marker appears in the VLESS stream; True when it did."""
        buf = b""
        stream = b""  # the VLESS stream after the transport
        deadline = time.monotonic() + TIMEOUT
        head_done = self.mode not in ("ws", "httpupgrade")
        h2 = {"preface": False, "sent": False, "headers": set(), "data": {}, "raw": b""}
        while time.monotonic() < deadline:
            try:
                buf += self._recv(tls)
            except EOFError:
                if self.got.get("vless_header"):
                    return True
                return False
            if self.mode in ("ws", "httpupgrade") and not head_done:
                if b"\r\n\r\n" not in buf:
                    continue
                head, _, buf = buf.partition(b"\r\n\r\n")
                head += b"\r\n\r\n"
                self.got["ws_upgrade"] = head
                key = ""
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("sec-websocket-key:"):
                        key = line.split(":", 1)[1].strip()
                resp = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                if key:
                    acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode())
                                           .digest()).decode()
                    resp += f"Sec-WebSocket-Accept: {acc}\r\n".encode()
                tls.sendall(resp + b"\r\n")
                head_done = True
            if self.mode == "ws":
                frames, stream = ws_frames(buf)
                if frames:
                    self.got["ws_frame"] = b"".join(frames[:4])
            elif self.mode == "h2":
                stream = self._h2(tls, buf, h2)
            else:
                stream = buf
            if self._vless(tls, stream):
                return True
        raise TimeoutError(f"the request did not arrive within {TIMEOUT} s ({len(buf)} bytes)")

    def _h2(self, tls, buf: bytes, st: dict) -> bytes:
        if not buf.startswith(H2_PREFACE[:len(buf)]) and not st["preface"]:
            raise ValueError(f"not an h2 preface: {buf[:40]!r}")
        if len(buf) < len(H2_PREFACE):
            return b""
        st["preface"] = True
        if not st["sent"]:
            tls.sendall(h2_frame(4, 0, 0) + h2_frame(4, 1, 0))  # SETTINGS, ACK of theirs
            st["sent"] = True
        pos, data = len(H2_PREFACE), {}
        while pos + 9 <= len(buf):
            n = int.from_bytes(buf[pos:pos + 3], "big")
            ftype, flags, sid = buf[pos + 3], buf[pos + 4], struct.unpack(">I", buf[pos + 5:pos + 9])[0] & 0x7FFFFFFF
            if pos + 9 + n > len(buf):
                break
            payload = buf[pos + 9:pos + 9 + n]
            if ftype == 1 and sid not in st["headers"]:  # HEADERS: answer 200 application/grpc
                st["headers"].add(sid)
                tls.sendall(h2_frame(1, 4, sid, b"\x88\x00\x0ccontent-type\x10application/grpc"))
            if ftype == 0:
                if flags & 0x8:
                    payload = payload[1:len(payload) - payload[0]]
                data[sid] = data.get(sid, b"") + payload
            pos += 9 + n
        if not data:
            return b""
        sid = min(data)
        msgs, p, d = [], 0, data[sid]
        while p + 5 <= len(d):
            n = struct.unpack(">I", d[p + 1:p + 5])[0]
            if p + 5 + n > len(d):
                break
            msgs.append(d[p:p + 5 + n])
            p += 5 + n
        if msgs:
            self.got["gun_message"] = msgs[:3]
        return b"".join(gun_payload(m) for m in msgs)

    def _vless(self, tls, stream: bytes) -> bool:
        parts = vless_split(stream)
        if not parts:
            return False
        header, rest, cmd = parts
        if self.marker not in rest:
            return False
        self.got["vless_header"] = header + rest[:512]
        self.got["cmd"] = cmd
        if cmd == 3:
            self.got["mux_frame"] = b"".join(mux_frames(rest)[:4])
        elif cmd == 2:
            self.got["udp_packet"] = rest[:600]
            if self.reply_udp and len(rest) >= 2:  # raw TLS only: no transport framing to add
                n = struct.unpack(">H", rest[:2])[0]
                answer = rest[2:2 + n]  # the query back: enough for the client to relay a reply
                tls.sendall(b"\x00\x00" + struct.pack(">H", len(answer)) + answer)
                self.got["replied"] = True
        return True


# --------------------------------------------------------------------------------------------
# Driving a client through its inbound


def socks5_connect(port: int, host: str, dport: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise RuntimeError("socks5: no-auth refused")
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + struct.pack(">H", dport))
    head = s.recv(4)
    if head[:2] != b"\x05\x00":
        raise RuntimeError(f"socks5 CONNECT refused: {head!r}")
    rest = {1: 6, 4: 18}.get(head[3], 0) if len(head) == 4 else 0
    if head[3:4] == b"\x03":
        rest = s.recv(1)[0] + 2
    while rest > 0:
        rest -= len(s.recv(rest))
    return s


def socks5_udp_datagram(payload: bytes) -> bytes:
    return b"\x00\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", 53) + payload


def socks5_udp(port: int, payload: bytes):
    """UDP ASSOCIATE and one datagram to 127.0.0.1:53: (control socket, UDP socket, relay address)."""
    ctl = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    ctl.sendall(b"\x05\x01\x00")
    if ctl.recv(2) != b"\x05\x00":
        raise RuntimeError("socks5: no-auth refused")
    ctl.sendall(b"\x05\x03\x00\x01" + bytes(6))
    head = ctl.recv(10)
    if head[:2] != b"\x05\x00":
        raise RuntimeError(f"socks5 UDP ASSOCIATE refused: {head!r}")
    relay_host = socket.inet_ntoa(head[4:8])
    relay = ("127.0.0.1" if relay_host == "0.0.0.0" else relay_host, struct.unpack(">H", head[8:10])[0])
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(socks5_udp_datagram(payload), relay)
    return ctl, u, relay


class Client:
    """One real client process with an inbound on `port` and an outbound to the recorder."""

    def __init__(self, name: str, argv: list, config_path: Path, text: str, port: int, workdir: Path):
        config_path.write_text(text)
        self.name, self.port = name, port
        self.log = open(workdir / f"{name}.log", "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
        wait_port(port, self.proc, name)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def v2ray_like(inbound_port: int, rec_port: int, net: str, mux: bool) -> str:
    stream = {"network": net, "security": "tls",
              "tlsSettings": {"serverName": "localhost", "allowInsecure": True}}
    if net == "ws":
        stream["wsSettings"] = {"path": "/ws"}
    elif net == "httpupgrade":
        stream["httpupgradeSettings"] = {"path": "/up"}
    elif net == "grpc":
        stream["grpcSettings"] = {"serviceName": "gun", "multiMode": True}
    out = {"protocol": "vless", "settings": {"vnext": [{"address": "127.0.0.1", "port": rec_port,
                                                        "users": [{"id": UUID, "encryption": "none"}]}]},
           "streamSettings": stream}
    if mux:
        out["mux"] = {"enabled": True, "concurrency": 8}
    return json.dumps({"log": {"loglevel": "warning"},
                       "inbounds": [{"listen": "127.0.0.1", "port": inbound_port, "protocol": "socks",
                                     "settings": {"auth": "noauth", "udp": True, "ip": "127.0.0.1"}}],
                       "outbounds": [out]})


def sing_box(inbound_port: int, rec_port: int, net: str, packet_encoding: str) -> str:
    out = {"type": "vless", "tag": "v", "server": "127.0.0.1", "server_port": rec_port, "uuid": UUID,
           "packet_encoding": packet_encoding,
           "tls": {"enabled": True, "server_name": "localhost", "insecure": True}}
    if net == "ws":
        out["transport"] = {"type": "ws", "path": "/ws"}
    elif net == "httpupgrade":
        out["transport"] = {"type": "httpupgrade", "path": "/up"}
    elif net == "grpc":
        out["transport"] = {"type": "grpc", "service_name": "gun"}
        out["tls"]["alpn"] = ["h2"]
    return json.dumps({"log": {"level": "warn"},
                       "inbounds": [{"type": "socks", "listen": "127.0.0.1", "listen_port": inbound_port}],
                       "outbounds": [out]})


def mihomo(inbound_port: int, rec_port: int, net: str) -> str:
    proxy = {"name": "v", "type": "vless", "server": "127.0.0.1", "port": rec_port, "uuid": UUID, "udp": True,
             "tls": True, "servername": "localhost", "skip-cert-verify": True, "network": net}
    if net == "ws":
        proxy["ws-opts"] = {"path": "/ws"}
    elif net == "httpupgrade":
        proxy["network"] = "ws"
        proxy["ws-opts"] = {"path": "/up", "v2ray-http-upgrade": True}
    elif net == "grpc":
        proxy["grpc-opts"] = {"grpc-service-name": "gun"}
    # JSON is YAML: mihomo reads this as its config.
    return json.dumps({"mixed-port": inbound_port, "bind-address": "127.0.0.1", "allow-lan": False,
                       "mode": "rule", "log-level": "warning", "ipv6": False, "geodata-mode": False,
                       "dns": {"enable": False}, "proxies": [proxy], "rules": ["MATCH,v"]})


# (client, case, transport, what it carries, extra)
CASES = [
    ("v2ray", "tls_tcp", "tcp", "tcp", {}), ("v2ray", "tls_udp", "tcp", "udp", {}),
    ("v2ray", "ws", "ws", "tcp", {}), ("v2ray", "mux_tcp", "tcp", "tcp", {"mux": True}),
    ("v2ray", "mux_udp", "tcp", "udp", {"mux": True}),
    ("xray", "tls_tcp", "tcp", "tcp", {}), ("xray", "tls_udp", "tcp", "udp", {}),
    ("xray", "ws", "ws", "tcp", {}), ("xray", "httpupgrade", "httpupgrade", "tcp", {}),
    ("xray", "grpc", "grpc", "tcp", {}), ("xray", "mux_tcp", "tcp", "tcp", {"mux": True}),
    ("xray", "mux_udp", "tcp", "udp", {"mux": True}),
    ("sing-box", "tls_tcp", "tcp", "tcp", {}), ("sing-box", "tls_udp", "tcp", "udp", {"pe": ""}),
    ("sing-box", "xudp", "tcp", "udp", {"pe": "xudp"}), ("sing-box", "ws", "ws", "tcp", {}),
    ("sing-box", "httpupgrade", "httpupgrade", "tcp", {}), ("sing-box", "grpc", "grpc", "tcp", {}),
    ("mihomo", "tls_tcp", "tcp", "tcp", {}), ("mihomo", "xudp", "tcp", "udp", {}),
    ("mihomo", "ws", "ws", "tcp", {}), ("mihomo", "httpupgrade", "httpupgrade", "tcp", {}),
    ("mihomo", "grpc", "grpc", "tcp", {}),
]


def find_binary(name: str, peers: Path | None) -> Path | None:
    if peers and (peers / name).is_file():
        return peers / name
    found = shutil.which(name)
    return Path(found) if found else None


def version_of(name: str, binary: Path) -> str:
    argv = {"v2ray": [binary, "-version"], "xray": [binary, "version"], "sing-box": [binary, "version"],
            "mihomo": [binary, "-v"]}[name]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.split("\n")[0].split()
    for word in first:
        if word[:1].isdigit() or (word[:1] == "v" and word[1:2].isdigit()):
            return word.lstrip("v")
    return "unknown"


def capture(name: str, binary: Path, case: str, net: str, carry: str, extra: dict, cert, key, work: Path) -> dict:
    mode = {"tcp": "raw", "ws": "ws", "httpupgrade": "httpupgrade", "grpc": "h2"}[net]
    alpn = ("h2",) if net == "grpc" else ("http/1.1",)
    marker = DNS_PAYLOAD if carry == "udp" else HTTP_PAYLOAD
    rec = Recorder(cert, key, mode, alpn=alpn, marker=marker, reply_udp=carry == "udp" and mode == "raw")
    port = free_port()
    d = work / f"{name}-{case}"
    d.mkdir(parents=True)
    if name in ("v2ray", "xray"):
        text = v2ray_like(port, rec.port, net, extra.get("mux", False))
        cfg = d / "config.json"
        argv = [binary, "-config", cfg] if name == "v2ray" else [binary, "run", "-c", cfg]
    elif name == "sing-box":
        text = sing_box(port, rec.port, net, extra.get("pe", "xudp"))
        cfg = d / "config.json"
        argv = [binary, "run", "-c", cfg, "-D", d]
    else:
        text = mihomo(port, rec.port, net)
        cfg = d / "config.yaml"
        argv = [binary, "-d", d, "-f", cfg]
    client = Client(f"{name}-{case}", [str(a) for a in argv], cfg, text, port, d)
    held = []
    try:
        if carry == "tcp":
            # A client may route a connection that arrives while it is still loading its config
            # elsewhere (mihomo did, now and then): another one until the recorder has its bytes.
            for _ in range(4):
                s = socks5_connect(port, DOMAIN, 80)
                held.append(s)
                s.sendall(HTTP_PAYLOAD)
                if rec.done.wait(2.5):
                    break
        rec_reply = b""
        if carry == "udp":
            ctl, u, relay = socks5_udp(port, DNS_PAYLOAD)
            held += [ctl, u]
            for _ in range(20):  # a datagram sent before the client's UDP path is up is lost: again
                if rec.done.wait(0.5):
                    break
                u.sendto(socks5_udp_datagram(DNS_PAYLOAD), relay)
        rec.done.wait(2 * TIMEOUT + 5)
        if carry == "udp" and rec.got.get("replied"):
            u.settimeout(TIMEOUT)
            try:
                rec_reply, _ = u.recvfrom(65535)
            except socket.timeout:
                rec_reply = b""
        got = dict(rec.got)
        if rec_reply:
            got["socks5_udp"] = rec_reply
        if rec.error or "vless_header" not in got:
            log = (d / f"{name}-{case}.log").read_text(errors="replace")[-800:]
            got["error"] = rec.error or "nothing recorded"
            got["log"] = log
        return got
    finally:
        for s in held:
            s.close()
        client.stop()
        rec.sock.close()


def dig_queries() -> dict:
    """dig's own query bytes over UDP and TCP, recorded by a listener that never answers."""
    dig = shutil.which("dig")
    if not dig:
        return {}
    out = {}
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    u.settimeout(TIMEOUT)
    t = socket.socket()
    t.bind(("127.0.0.1", u.getsockname()[1]))
    t.listen(1)
    t.settimeout(TIMEOUT)
    port = u.getsockname()[1]
    version = subprocess.run([dig, "-v"], capture_output=True, text=True, timeout=10).stderr.split()
    tag = "dig-" + (version[1].split("-")[0] if len(version) > 1 else "unknown")
    try:
        for qtype, name in (("A", "a.vlessbench.test"), ("TXT", "route.vlessbench.test"), ("AAAA", "six.vlessbench.test")):
            p = subprocess.Popen([dig, "@127.0.0.1", "-p", str(port), name, qtype, "+tries=1", "+time=1"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            data, _ = u.recvfrom(65535)
            out[f"{tag}-udp-{qtype.lower()}"] = data
            p.kill()
            p.wait(5)
        p = subprocess.Popen([dig, "@127.0.0.1", "-p", str(port), "a.vlessbench.test", "+tcp", "+tries=1", "+time=1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c, _ = t.accept()
        c.settimeout(TIMEOUT)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
        c.close()
        out[f"{tag}-tcp-a"] = data[2:]  # the message without TCP's length prefix
        p.kill()
        p.wait(5)
    finally:
        u.close()
        t.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / "corpus")
    ap.add_argument("--peers", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="clients to capture (v2ray xray sing-box mihomo dig)")
    args = ap.parse_args()
    peers = args.peers or (Path(os.environ["VLESSBENCH_PEERS"]) if os.environ.get("VLESSBENCH_PEERS") else None)
    if peers is None and (ROOT.parent / "shared" / "peers").is_dir():
        peers = ROOT.parent / "shared" / "peers"
    if peers is None and Path("/work/shared/peers").is_dir():
        peers = Path("/work/shared/peers")
    only = set(args.only) if args.only else {"v2ray", "xray", "sing-box", "mihomo", "dig"}
    work = Path(tempfile.mkdtemp(prefix="vlessbench-capture-"))
    key, cert = work / "key.pem", work / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-subj", "/CN=localhost", "-days", "2"],
                   check=True, capture_output=True, timeout=30)
    written, failed, missing, kept = [], [], [], []  # kept: a failed case's earlier seeds stay
    seeds: dict = {}
    origins = {}
    for name in ("v2ray", "xray", "sing-box", "mihomo"):
        if name not in only:
            continue
        b = find_binary(name, peers)
        if not b:
            missing.append(name)
            continue
        origins[name] = (b, f"{name}-{version_of(name, b)}")
    for name, case, net, carry, extra in CASES:
        if name not in origins:
            continue
        b, origin = origins[name]
        for attempt in range(3):  # a client's first dial can be lost to its own start-up: again
            got = capture(name, b, case, net, carry, extra, cert, key, work / f"{attempt}")
            if "error" not in got:
                break
        if "error" in got:
            failed.append(f"{origin} {case}: {got['error']}\n    {got['log'][-400:]!r}")
            kept.append(f"cap-{origin}-{case}")
        for target in ("client_hello", "vless_header", "mux_frame", "udp_packet", "ws_upgrade", "ws_frame",
                       "socks5_udp"):
            if got.get(target):
                if target == "client_hello" and case != "tls_tcp" and net != "grpc" and net != "ws":
                    continue  # one hello per client and ALPN: raw TLS, ws (http/1.1) and gRPC (h2)
                seeds[(target, f"cap-{origin}-{case}")] = got[target]
        for i, m in enumerate(got.get("gun_message", [])):
            seeds[("gun_message", f"cap-{origin}-{case}-{i}")] = m
    if "dig" in only:
        dq = dig_queries()
        if not dq:
            missing.append("dig")
        for k, v in dq.items():
            seeds[("dns_query", f"cap-{k}")] = v
    # This run's clients replace their earlier seeds (any version); other files stay.
    prefixes = [f"cap-{n}-" for n in origins] + (["cap-dig-"] if "dig" in only and "dig" not in missing else [])
    for d in args.out.iterdir():
        for f in d.iterdir() if d.is_dir() else []:
            if any(f.name.startswith(p) for p in prefixes) and not any(
                    f.name == k or f.name.startswith(k + "-") for k in kept):
                f.unlink()
    for (target, fname), data in sorted(seeds.items()):
        p = args.out / target / fname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        written.append(f"{target}/{fname} ({len(data)} B)")
    print("\n".join(written))
    for m in missing:
        print(f"missing: {m} (not captured)", file=sys.stderr)
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
