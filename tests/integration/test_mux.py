"""VLESS command 3 (Mux.Cool, XUDP): the real v2ray 4.34 client with "mux" on (TCP and UDP
sub-connections of one VLESS session, each logged as vless.sub with its parent session, the
targets naming session and sub), the same bulk echo with our own client (core/client/mux_client through
`vlessbench_load mux-echo`), and hostile frames from a raw TLS client, each ending its
sub-connection or the session with a reason while the daemon keeps serving (docs/sessions.md "Mux")."""
import hashlib
import json
import os
import socket
import struct
import subprocess
import threading
import time

from harness import (ANY_PORT, CLIENT_BIN, BIN, SANITIZED, Daemon, EchoServer, Suite, TlsClient, V2ray, check, free_port,
                     http_request, recv_exact, socks5_connect,
                     new_uuid, read_mux_frame, read_vless_response_header, require_binary, v2ray_socks_config, vless_get,
                     vless_header)
from harness import echo_datagram as pad
from harness import udp_echo_trailer as trailer

suite = Suite("test_mux")
require_binary()


UUID = new_uuid()
MAX_SUBS = 12
D = Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": ANY_PORT}],
    "target": [{"name": "http", "listen": ANY_PORT}],
    "udp_target": [{"name": "udp", "listen": ANY_PORT}],
    "dns": [{"name": "dns", "listen": ANY_PORT}],
}, limits={"max_mux_subs": MAX_SUBS})
VP = D.port("edge")
TP = D.port("http")
UP = D.port("udp")
DNS_PORT = D.port("dns")
BULK = 16 << 20  # each way, per connection (issue 12's acceptance)
BLOCK = 1 << 18  # the unit of the non-repeating upload stream (stream_block)
CONNS = 8


ECHO = EchoServer()


def stream_block(seed: int, index: int) -> bytes:
    """Block `index` of connection `seed`'s upload: SHAKE-256 of (seed, index), so no two blocks
    of one stream, and no two streams, share their bytes. A frame dropped, duplicated, reordered
    or delivered to another sub changes what arrives at its offset."""
    return hashlib.shake_256(b"test_mux %d %d" % (seed, index)).digest(BLOCK)


def bulk_echo(socks_port: int, seed: int, result: dict):
    """BULK up (sent by a thread) and the same BULK back, compared byte for byte with what this
    connection sent (result: bytes received, offset of the first difference or None). No
    half-close: v2ray 4.34's mux client ends the whole sub-connection (End) when its local client
    shuts down its sending side, so the echo is read in full before closing."""
    s = socks5_connect(socks_port, ECHO.port)

    def send():
        for i in range(BULK // BLOCK):
            s.sendall(stream_block(seed, i))

    t = threading.Thread(target=send, daemon=True)
    t.start()
    got = 0
    first_diff = None
    want = b""
    with s:
        while got < BULK:
            chunk = s.recv(min(1 << 18, BULK - got))
            if not chunk:
                break
            pos = 0
            while pos < len(chunk):  # compare against the expected bytes at this offset
                if not want:
                    want = stream_block(seed, (got + pos) // BLOCK)[(got + pos) % BLOCK:]
                n = min(len(want), len(chunk) - pos)
                if first_diff is None and chunk[pos:pos + n] != want[:n]:
                    first_diff = got + pos + next(k for k in range(n) if chunk[pos + k] != want[k])
                want = want[n:]
                pos += n
            got += len(chunk)
        t.join(30)
    result[seed] = (got, first_diff)


def http_via_socks(socks_port: int, path: str, seq: str) -> tuple[dict, bytes]:
    with socks5_connect(socks_port, TP) as s:
        s.sendall(http_request("GET", path, headers={"Connection": "close", "X-Vlessbench-Seq": seq,
                                                     "X-Vlessbench-Run": "mux"}))
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return headers, body


@suite.test
def v2ray_mux_tcp_and_udp():
    socks_port = free_port(proto="tcp+udp")
    mark = D.mark()
    with V2ray(v2ray_socks_config(socks_port, VP, UUID, mux_concurrency=CONNS), socks_port) as v:
        # (1) 8 concurrent connections, 16 MiB each way, each compared byte for byte with its own non-repeating stream.
        results: dict = {}
        threads = [threading.Thread(target=bulk_echo, args=(socks_port, i, results), daemon=True)
                   for i in range(CONNS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check(len(results) == CONNS, (sorted(results), D.events(since=mark)[-12:], v.output()[-1000:]))
        for seed, (got, first_diff) in results.items():
            check(got == BULK and first_diff is None,
                  (seed, got, f"first difference at byte {first_diff}", D.events("vless.sub", since=mark)[-8:]))
        # The target names the session and the sub-connection of each request.
        routes = {}
        for i in range(4):
            h, body = http_via_socks(socks_port, "/bytes/1000", f"m{i}")
            check(len(body) == 1000, len(body))
            routes[f"m{i}"] = h.get("x-vlessbench-route", "")
        # (2) UDP through the SOCKS5 inbound, carried as a UDP sub-connection.
        ctl = socket.create_connection(("127.0.0.1", socks_port), timeout=5)
        ctl.sendall(b"\x05\x01\x00")
        check(ctl.recv(2) == b"\x05\x00")
        ctl.sendall(b"\x05\x03\x00\x01" + bytes(6))
        head = ctl.recv(10)
        check(head[:2] == b"\x05\x00", head)
        relay = ("127.0.0.1", struct.unpack(">H", head[8:10])[0])
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        echoes = []
        try:
            for i in range(50):
                u.sendto(b"\x00\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", UP) + pad(b"d%d" % i),
                         relay)
                data, _ = u.recvfrom(65535)
                echoes.append(trailer(data[10:]))
        finally:
            u.close()
            ctl.close()
    # v2ray has stopped: the mux session ends, after all of its sub-connections.
    s = D.wait_event("vless.session", since=mark, timeout=10, cmd="mux")
    sid = s["session"]
    sessions = D.events("vless.session", since=mark)
    check(len(sessions) == 1, [(e["session"], e["cmd"]) for e in sessions])
    subs = D.events("vless.sub", since=mark)
    check(all(e["session"] == sid for e in subs), subs)
    tcp_subs = [e for e in subs if e["net"] == "tcp" and e["dest"] == f"127.0.0.1:{ECHO.port}"]
    check(len(tcp_subs) == CONNS, tcp_subs)
    check(all(e["bytes_up"] == BULK and e["bytes_down"] == BULK for e in tcp_subs), tcp_subs)
    check(s["subs"] == len(subs) and s["subs_refused"] == 0, (s, len(subs)))
    check(s["bytes_up"] >= CONNS * BULK and s["bytes_down"] >= CONNS * BULK, s)
    check(s["dest"] == "v1.mux.cool", s)
    # The target's lines and headers name the session and the sub.
    by_sub = {e["sub"]: e for e in subs}
    for seq, route in routes.items():
        r = D.wait_event("http.request", since=mark, seq=seq)
        check(r["route"] == "vless" and r["vless_session"] == sid and r["vless_sub"] in by_sub, r)
        check(by_sub[r["vless_sub"]]["dest"] == f"127.0.0.1:{TP}", (r, by_sub[r["vless_sub"]]))
        check(route == f"vless session={sid} sub={r['vless_sub']} user=alice", (route, r))
    udp_subs = [e for e in subs if e["net"] == "udp"]
    check(len(udp_subs) >= 1 and udp_subs[0]["dest"] == f"127.0.0.1:{UP}", udp_subs)
    usub = udp_subs[0]["sub"]
    want = f"vless session={sid} sub={usub} user=alice"
    check(echoes == [(b"d%d" % i, "udp", want) for i in range(50)], echoes[:3])
    check(udp_subs[0]["packets_up"] == 50 and udp_subs[0]["packets_down"] == 50, udp_subs[0])


@suite.test
def own_client_mux_echo():
    """Acceptance (3) of issue 12 for Mux.Cool: our own client (core/client/mux_client, one mux connection)
    does what v2ray's did: 8 concurrent TCP subs, each echoing BULK both ways with matching SHA-256,
    and one XUDP sub at the same time whose 100 echoes each name the session and the sub."""
    load = CLIENT_BIN / "vlessbench_load"
    check(load.exists(), f"{load} not built (tools/test.sh builds it in the ASan tree too)")
    # The ASan tree takes ~5 s for the full size (3 runs, all clean); a quarter of it keeps the
    # sanitizer run short, the Release run moves the 16 MiB.
    bulk = BULK // 4 if SANITIZED else BULK
    mark = D.mark()
    t0 = time.monotonic()
    r = subprocess.run([str(load), "mux-echo", "--server", f"127.0.0.1:{VP}", "--uuid", UUID,
                        "--dest", f"127.0.0.1:{ECHO.port}", "--subs", str(CONNS), "--bytes", str(bulk),
                        "--udp-dest", f"127.0.0.1:{UP}", "--udp-packets", "100", "--seconds", "60"],
                       capture_output=True, text=True, timeout=90)
    print(f"  mux-echo {CONNS} x {bulk >> 20} MiB: {time.monotonic() - t0:.2f} s")
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    check(r.returncode == 0 and lines and lines[-1]["pass"] is True, (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    subs_out = [x for x in lines if "sub" in x]
    check(len(subs_out) == CONNS, subs_out)
    udp_out = [x for x in lines if x.get("udp_sub")]
    check(len(udp_out) == 1 and udp_out[0]["packets_echoed"] == 100 and not udp_out[0]["error"], udp_out)
    for x in subs_out:
        check(x["match"] and x["bytes_up"] == bulk and x["bytes_down"] == bulk, x)
        check(x["sha256_sent"] == x["sha256_received"] and len(x["sha256_sent"]) == 64, x)
    check(len({x["sha256_sent"] for x in subs_out}) == CONNS, "each sub sends its own bytes")
    s = D.wait_event("vless.session", since=mark, timeout=10, cmd="mux")
    sessions = D.events("vless.session", since=mark)
    check(len(sessions) == 1, [(e["session"], e["cmd"]) for e in sessions])
    all_subs = D.events("vless.sub", since=mark)
    check(all(e["session"] == s["session"] for e in all_subs), all_subs)
    # The UDP sub: XUDP, 100 datagrams each way, every echo's trailer naming this session and sub.
    udp = [e for e in all_subs if e["net"] == "udp"]
    check(len(udp) == 1 and udp[0]["xudp"] and udp[0]["dest"] == f"127.0.0.1:{UP}", udp)
    check(udp[0]["packets_up"] == 100 and udp[0]["packets_down"] == 100, udp[0])
    check((udp_out[0]["route_session"], udp_out[0]["route_sub"]) == (s["session"], udp[0]["sub"]), (udp_out, udp))
    subs = [e for e in all_subs if e["net"] == "tcp"]
    check(len(subs) == CONNS and all(e["dest"] == f"127.0.0.1:{ECHO.port}" for e in subs), subs)
    check(all(e["bytes_up"] == bulk and e["bytes_down"] == bulk for e in subs), subs)
    check(sorted(e["mux_id"] for e in subs) == sorted(x["mux_id"] for x in subs_out), subs)
    check(s["subs"] == CONNS + 1 and s["subs_refused"] == 0, s)
    check(s["bytes_up"] >= CONNS * bulk and s["bytes_down"] >= CONNS * bulk, s)


# ---------------------------------------------------------------------------------------------
# Hostile frames from a raw client

NEW, KEEP, END, KEEPALIVE = 1, 2, 3, 4


def target(port: int, addr: str = "127.0.0.1", net: int = 1) -> bytes:
    if addr.replace(".", "").isdigit():
        return bytes([net]) + struct.pack(">H", port) + b"\x01" + socket.inet_aton(addr)
    return bytes([net]) + struct.pack(">H", port) + b"\x02" + bytes([len(addr)]) + addr.encode()


def mux(sid: int, st: int, data: bytes | None = None, dest: bytes = b"", opt: int | None = None,
        gid: bytes = b"") -> bytes:
    o = (1 if data is not None else 0) if opt is None else opt
    meta = struct.pack(">HBB", sid, st, o) + dest + gid
    out = struct.pack(">H", len(meta)) + meta
    if data is not None:
        out += struct.pack(">H", len(data)) + data
    return out


def read_frame(c) -> tuple[int, int, int, bytes, bytes]:
    """(id, status, option, extra metadata, data) of the next frame from the daemon."""
    return read_mux_frame(c.stream)


def mux_client() -> TlsClient:
    c = TlsClient(VP, timeout=10)
    c.handshake()
    return c


def session_of(mark, **match):
    return D.wait_event("vless.session", since=mark, timeout=8, cmd="mux", **match)


@suite.test
def framing_errors_end_the_session():
    for name, junk in (("metadata_too_short", b"\x00\x02\x00\x01"),
                       ("unknown_status", mux(1, 9)),
                       ("unknown_option_bits", mux(1, KEEPALIVE, opt=0x80)),
                       ("metadata_too_long", b"\x04\x00")):
        mark = D.mark()
        with mux_client() as c:
            c.send(vless_header(UUID, 0, cmd=3) + mux(1, KEEPALIVE) + junk)
            read_vless_response_header(c.stream)
            check(c.stream.read_to_eof() == b"", "the session closes")
        e = session_of(mark)
        check(e["close_reason"] == "mux_error" and e["mux_error"] == name, e)


@suite.test
def sub_errors_keep_the_session():
    mark = D.mark()
    req = http_request("GET", "/bytes/5", headers={"Connection": "close"})
    with mux_client() as c:
        c.send(vless_header(UUID, 0, cmd=3) + mux(5, KEEP, b"x"))  # an id never opened
        read_vless_response_header(c.stream)
        check(read_frame(c)[:3] == (5, END, 2), "End with the error option")
        # A real request, then the same id again while it is live (one write: before the answer).
        c.send(mux(1, NEW, req, target(TP)) + mux(1, NEW, None, target(TP)))
        frames = [read_frame(c)]
        while frames[-1][1] != END:
            frames.append(read_frame(c))
        check(frames[-1][:3] == (1, END, 2), frames[-1])
        c.send(mux(2, NEW, None, target(80, "v1.mux.cool")))  # mux inside mux
        check(read_frame(c)[:3] == (2, END, 2))
        c.send(mux(3, NEW, b"x", target(53, "192.0.2.1", net=2)))  # UDP to a denied destination
        check(read_frame(c)[:3] == (3, END, 2))
        gid = b"\x01" * 8
        c.send(mux(4, NEW, pad(b"a"), target(UP, net=2), gid=gid))  # XUDP: data with its target, then without
        sid, st, opt, meta, data = read_frame(c)
        check((sid, st) == (4, KEEP) and trailer(data)[0] == b"a" and meta == target(UP, net=2), (sid, st, meta, data))
        c.send(mux(4, KEEP, b"b"))
        check(read_frame(c)[:3] == (4, END, 2))
        # An id is free after End: a New reuses it.
        c.send(mux(1, NEW, req, target(TP)))
        body = b""
        while True:
            sid, st, opt, _, data = read_frame(c)
            check(sid == 1, sid)
            body += data
            if st == END:
                break
        check(body.endswith(b"\r\n\r\nabcde"), body[-40:])
        # A flood of New frames: the cap holds, each past it refused.
        c.send(b"".join(mux(100 + i, NEW, None, target(TP)) for i in range(MAX_SUBS + 5)))
        refused = set()
        for _ in range(5):
            sid, st, opt, _, _ = read_frame(c)
            check(st == END and opt == 2, (sid, st, opt))
            refused.add(sid)
        check(refused == {100 + MAX_SUBS + i for i in range(5)}, refused)
        c.send(b"".join(mux(100 + i, END) for i in range(MAX_SUBS)))
        c.close_notify()
        c.stream.read_to_eof()
    e = session_of(mark)
    check(e["close_reason"] == "client_eof" and e["subs_refused"] == 7, e)
    subs = D.events("vless.sub", since=mark)
    errors = {(x["mux_id"], x.get("error")) for x in subs if x.get("error")}
    want = {(5, "unknown_sub"), (1, "duplicate_new"), (2, "mux_in_mux"), (3, "dest_not_allowed"),
            (4, "xudp_missing_address")} | {(100 + MAX_SUBS + i, "too_many_subs") for i in range(5)}
    check(errors == want, sorted(errors ^ want))
    check(all(x["session"] == e["session"] for x in subs), subs)
    denied = [x for x in subs if x.get("error") == "dest_not_allowed"][0]
    check(denied["close_reason"] == "rejected" and denied["detail"] == "192.0.2.1:53", denied)
    check([x["xudp"] for x in subs if x["mux_id"] == 4] == [True], subs)
    # Still serving.
    resp, _ = vless_get(VP, UUID, TP)
    check(resp.status == 200, resp.status)


@suite.test
def dns_through_a_udp_sub_names_it():
    mark = D.mark()
    q = struct.pack(">HHHHHH", 77, 0x0100, 1, 0, 0, 0) + b"\x03sub\x0avlessbench\x04test\x00" + struct.pack(">HH", 1, 1)
    with mux_client() as c:
        c.send(vless_header(UUID, 0, cmd=3) + mux(0, KEEPALIVE) + mux(6, NEW, q, target(DNS_PORT, net=2)))
        read_vless_response_header(c.stream)
        sid, st, _, meta, data = read_frame(c)
        check((sid, st, meta) == (6, KEEP, b""), (sid, st, meta))  # plain UDP: no target on the answer
        # The A record (rdlength 4, 127.0.0.1), then the route TXT record naming the sub.
        check(data[:2] == struct.pack(">H", 77) and b"\x00\x04\x7f\x00\x00\x01" in data, data)
        answer = data
        c.send(mux(6, END))
        c.close_notify()
        c.stream.read_to_eof()
    e = session_of(mark)
    sub = D.wait_event("vless.sub", since=mark, mux_id=6)
    check(sub["net"] == "udp" and sub["close_reason"] == "client_end" and sub["packets_down"] == 1, sub)
    d = D.wait_event("dns.query", since=mark, name="sub.vlessbench.test")
    check(d["route"] == "vless" and d["vless_session"] == e["session"] and d["vless_sub"] == sub["sub"], d)
    route = f"VLESSBENCH-DNS dns vless session={e['session']} sub={sub['sub']} user=alice".encode()
    check(answer.endswith(route), answer)


class Sinkhole:
    """A TCP server on loopback that accepts and never reads: a stalled destination."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.sock.settimeout(0.2)
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopped:
            try:
                self.conns.append(self.sock.accept()[0])
            except socket.timeout:
                continue
            except OSError:
                return

    def stop(self):
        self.stopped = True
        for c in self.conns:
            c.close()
        self.sock.close()


@suite.test
def stalled_destination_does_not_block_others():
    hole = Sinkhole()
    mark = D.mark()
    chunk = b"s" * 60000
    try:
        with mux_client() as c:
            c.send(vless_header(UUID, 0, cmd=3) + mux(1, NEW, None, target(hole.port)))
            read_vless_response_header(c.stream)
            # Far more than the sub-connection's queue and both socket buffers can hold.
            sender = threading.Thread(target=lambda: c.send(b"".join(mux(1, KEEP, chunk) for _ in range(400))),
                                      daemon=True)
            sender.start()
            sender.join(20)
            # The stalled sub-connection ends alone; then another one is served on the same session.
            check(read_frame(c)[:3] == (1, END, 2), "End with the error option")
            c.send(mux(2, NEW, http_request("GET", "/bytes/3", headers={"Connection": "close"}), target(TP)))
            body = b""
            while True:
                sid, st, _, _, data = read_frame(c)
                check(sid == 2, sid)
                body += data
                if st == END:
                    break
            check(body.endswith(b"\r\n\r\nabc"), body[-40:])
            c.close_notify()
            c.stream.read_to_eof()
    finally:
        hole.stop()
    stalled = D.wait_event("vless.sub", since=mark, mux_id=1)
    check(stalled["close_reason"] == "error" and stalled["error"] == "sub_stalled", stalled)
    check(stalled["bytes_up"] < 400 * len(chunk), stalled)


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        ECHO.stop()
        D.stop()
