"""Raw clients: buffered streams over plain and TLS sockets (memory BIOs, so every TCP write is
under the test's control), HTTP requests and responses, an echo server, SOCKS5 (CONNECT and UDP
ASSOCIATE), one VLESS GET, curl."""
from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
import threading
import time

from .checks import check
from .env import CURL, LOOPBACK
from .frames import read_vless_response_header, vless_header
from .processes import set_pdeathsig

# HTTP over any byte stream

class Stream:
    """Buffered reads over a recv function (plain socket or TLS); b"" from recv means EOF."""

    def __init__(self, recv, send):
        self._recv = recv
        self._send = send
        self.buf = b""

    def send(self, data: bytes) -> None:
        self._send(data)

    def _fill(self) -> bool:
        data = self._recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"EOF after {len(self.buf)} of {n} bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until(self, sep: bytes, limit: int = 1 << 20) -> bytes:
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("no separator within limit")
            if not self._fill():
                raise EOFError(f"EOF before {sep!r}; have {self.buf[:200]!r}")
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_to_eof(self, limit: int = 1 << 26) -> bytes:
        while len(self.buf) < limit and self._fill():
            pass
        out, self.buf = self.buf, b""
        return out

    def at_eof(self) -> bool:
        """True if the peer closed (after whatever is buffered); blocks until data or EOF."""
        if self.buf:
            return False
        try:
            return not self._fill()
        except (ConnectionResetError, ssl.SSLError):
            return True

    def read_response(self, head_only: bool = False) -> "Response":
        head = self.read_until(b"\r\n\r\n")
        lines = head[:-4].decode("latin-1").split("\r\n")
        version, status, *rest = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        status = int(status)
        if head_only or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "content-length" in headers:
            body = self.read_exact(int(headers["content-length"]))
        else:
            body = self.read_to_eof()
        return Response(status, headers, body, version)


class Response:
    def __init__(self, status: int, headers: dict, body: bytes, version: str = "HTTP/1.1"):
        self.status = status
        self.headers = headers
        self.body = body
        self.version = version

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:80]!r}>"


class EchoServer:
    """A TCP echo server on loopback: every byte comes back; one thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    @staticmethod
    def serve(c):
        c.settimeout(30)
        with c:
            try:
                while True:
                    data = c.recv(1 << 18)
                    if not data:
                        c.shutdown(socket.SHUT_WR)
                        return
                    c.sendall(data)
            except OSError:
                return

    def stop(self):
        self.stopped = True
        self.sock.close()


def socks5_connect(socks_port: int, port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", socks_port), timeout=30)
    s.sendall(b"\x05\x01\x00")
    check(s.recv(2) == b"\x05\x00")
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", port))
    reply = b""
    while len(reply) < 10:
        chunk = s.recv(10 - len(reply))
        check(chunk, "socks reply cut")
        reply += chunk
    check(reply[:2] == b"\x05\x00", reply)
    return s


def socks5_udp_associate(port: int, timeout: float = 5.0, host: str = LOOPBACK) -> tuple[socket.socket, tuple[str, int]]:
    """A SOCKS5 UDP ASSOCIATE (RFC 1928) on a client's entry: the TCP control connection (keep it
    open: the association ends with it) and the relay's address (a wildcard one as host). A refusal
    or a cut raises OSError (bench/udp_rtt.py reports it as the path's failure)."""
    ctl = socket.create_connection((host, port), timeout=timeout)
    try:
        ctl.sendall(b"\x05\x01\x00")
        if _socks_read(ctl, 2) != b"\x05\x00":
            raise OSError("socks5: no-auth refused")
        ctl.sendall(b"\x05\x03\x00\x01" + bytes(6))
        head = _socks_read(ctl, 4)
        if head[:2] != b"\x05\x00":
            raise OSError(f"socks5: UDP ASSOCIATE answered {head!r}")
        if head[3] == 1:
            addr = socket.inet_ntoa(_socks_read(ctl, 4))
        elif head[3] == 4:
            addr = socket.inet_ntop(socket.AF_INET6, _socks_read(ctl, 16))
        else:
            addr = _socks_read(ctl, _socks_read(ctl, 1)[0]).decode()
        (rport,) = struct.unpack(">H", _socks_read(ctl, 2))
        return ctl, (host if addr in ("0.0.0.0", "::") else addr, rport)
    except Exception:
        ctl.close()
        raise


def _socks_read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise OSError("socks5: control connection closed")
        out += chunk
    return out


def socks5_udp_header(port: int, host: str = LOOPBACK) -> bytes:
    """The SOCKS5 UDP request header (RSV, FRAG 0, IPv4 host:port) in front of each datagram."""
    return b"\x00\x00\x00\x01" + socket.inet_aton(host) + struct.pack(">H", port)


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(1 << 18, n - len(out)))
        check(chunk, f"EOF after {len(out)} of {n}")
        out += chunk
    return bytes(out)


def http_request(method: str, path: str, host: str = "127.0.0.1", headers: dict | None = None,
                 body: bytes = b"") -> bytes:
    h = {"Host": host}
    if body or method == "POST":
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def probe_ticket(port: int, host: str = "127.0.0.1") -> dict:
    """A browser-probe run id and results token from the target at host:port (GET /probe/token,
    docs/probe.md): {"run": ..., "token": ...}; post with {"X-Vlessbench-Probe-Token": token}."""
    with tcp_connect(port, host) as s:
        s.sendall(http_request("GET", "/probe/token", host=host))
        r = plain_stream(s).read_response()
    if r.status != 200:
        raise AssertionError(f"GET /probe/token: {r}")
    return json.loads(r.body)


def tcp_connect(port: int, host: str = LOOPBACK, nodelay: bool = True, timeout: float = 5.0) -> socket.socket:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def plain_stream(sock: socket.socket) -> Stream:
    return Stream(sock.recv, sock.sendall)



# TLS + VLESS raw client (memory BIOs, so every TCP write is under our control)

def client_tls_context(tls13: bool = True) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if tls13:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class TlsClient:
    """A TLS client over a plain socket with memory BIOs: one TCP send per flush."""

    def __init__(self, port: int, host: str = LOOPBACK, nodelay: bool = True, tls13: bool = True,
                 sni: str | None = "localhost", timeout: float = 5.0, sock: socket.socket | None = None,
                 context: ssl.SSLContext | None = None):
        self.sock = sock or tcp_connect(port, host, nodelay=nodelay, timeout=timeout)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        ctx = context or client_tls_context(tls13)
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=sni)
        self.stream = Stream(self.recv, self.send)
        self.eof = False

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _pull(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            self.incoming.write_eof()
            self.eof = True
            return False
        self.incoming.write(data)
        return True

    def handshake(self) -> "TlsClient":
        for _ in range(1000):
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._pull():
                    raise ConnectionError("EOF during TLS handshake") from None
        self._flush()
        return self

    def send(self, data: bytes) -> None:
        self.obj.write(data)
        self._flush()

    def recv(self, n: int = 65536) -> bytes:
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                if self.eof or not self._pull():
                    # Peer closed TCP without close_notify: treat as EOF (the test decides).
                    return b""
            except ssl.SSLZeroReturnError:
                return b""
            except ssl.SSLEOFError:
                return b""

    def close_notify(self) -> None:
        """Half-close: our close_notify goes out, reading stays possible."""
        try:
            self.obj.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        self._flush()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False





def vless_get(vless_port: int, user_uuid: str, target_port: int, path: str = "/", nodelay: bool = True,
              headers: dict | None = None, dest: str = LOOPBACK, timeout: float = 5.0):
    """One new connection: TLS 1.3 + VLESS header + GET in one write. Returns (response, seconds)."""
    t0 = time.perf_counter()
    with TlsClient(vless_port, nodelay=nodelay, timeout=timeout) as c:
        c.handshake()
        req = http_request("GET", path, headers={"Connection": "close", **(headers or {})})
        c.send(vless_header(user_uuid, target_port, dest) + req)
        read_vless_response_header(c.stream)
        resp = c.stream.read_response()
        elapsed = time.perf_counter() - t0
    return resp, elapsed


# curl

def curl(args, timeout: float = 15.0) -> subprocess.CompletedProcess:
    return subprocess.run([CURL, "-sS", "--max-time", str(int(timeout)), *map(str, args)],
                          capture_output=True, timeout=timeout + 5, preexec_fn=set_pdeathsig)


def curl_headers(text: bytes) -> dict:
    headers = {}
    for line in text.decode("latin-1").split("\r\n"):
        if ":" in line and not line.startswith("HTTP/"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return headers
