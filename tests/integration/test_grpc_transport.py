#!/usr/bin/env python3
"""The gRPC ("gun") transport (issue 13, docs/sessions.md "Transports").

- The one built-in client (`vlessbench run`) over grpc/TLS (ALPN h2) and h2c: every sample relayed,
  the route proof naming transport=grpc, the access log too.
- curl's HTTP/2 (--http2-prior-knowledge on the h2c listener, --http2 -k over TLS) POSTing a gRPC
  body built here by hand (Hunk messages: 00 <u32 length> 0a <varint> data) that carries a VLESS
  header and an HTTP request: :status 200, content-type application/grpc, the VLESS response and
  the target's answer inside the response messages, trailers grpc-status: 0.
- A wrong path, method or content type: an HTTP error status with grpc-status 12 and a
  vless.reject with the reason, never a hang; broken gun framing (a compressed message, a group
  field, a message over the cap): grpc-status 13 and the session's vless.reject names it.
- Hostile HTTP/2 built frame by frame (24-byte preface, 9-byte frame headers): PING and SETTINGS
  floods, an RST_STREAM storm, more streams than SETTINGS_MAX_CONCURRENT_STREAMS, a bad preface:
  the connection ends with a logged reason, the daemon lives on with bounded memory. A stream
  that never opens its window stalls neither its neighbour on the connection nor memory.
"""
from __future__ import annotations

import csv
import json
import re
import socket
import struct
import subprocess
import time

import harness as h
from grpc_wire import DATA, HEADERS, PING, PREFACE, RST_STREAM, SETTINGS, WINDOW_UPDATE, h2frame, hunk, request_block, unhunk
from harness import LOOPBACK, check

suite = h.Suite("test_grpc_transport")
h.require_binary()
RUNNER = h.CLIENT_BIN / "vlessbench"
if not RUNNER.exists():
    RUNNER = h.REPO / "build" / "bin" / "vlessbench"
SERVICE = "example.Gun"


def make_daemon() -> h.Daemon:
    port = h.free_port
    cfg = {
        "users": [{"name": "tester", "uuid": h.new_uuid()}],
        "vless": [
            {"name": "grpc", "listen": f"{LOOPBACK}:{port()}", "transport": "grpc", "service_name": SERVICE},
            {"name": "h2c", "listen": f"{LOOPBACK}:{port()}", "transport": "grpc", "tls": False},
        ],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
        "limits": {"handshake_timeout_ms": 3000},
    }
    return h.Daemon(cfg)


D = make_daemon()


def link(listener: str, query: str) -> str:
    return f"vless://{D.uuid}@{LOOPBACK}:{D.port(listener)}?encryption=none&{query}#{listener}"


def sessions(since: int = 0, **match) -> list[dict]:
    return D.events("vless.session", since=since, **match)


def wait_sessions(count: int, since: int, timeout: float = 10.0, **match) -> list[dict]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = sessions(since, **match)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{len(sessions(since, **match))} of {count} vless.session events {match}")


def vless_body() -> bytes:
    request = h.http_request("GET", "/", headers={"Connection": "close"})
    return hunk(h.vless_header(D.uuid, D.target_port)) + hunk(request)


# --------------------------------------------------------------------------------------------

@suite.test
def builtin_client_over_grpc_and_h2c():
    mark = D.mark()
    out = h.tempdir("vlessbench-grpc-run-")
    paths = {
        "grpc": link("grpc", f"security=tls&sni=localhost&allowInsecure=1&type=grpc&serviceName={SERVICE}"),
        "grpcmulti": link("grpc", f"security=tls&sni=localhost&allowInsecure=1&type=grpc&serviceName={SERVICE}"
                                  "&mode=multi"),
        "h2c": link("h2c", "security=none&type=grpc"),
    }
    argv = [str(RUNNER), "run", "--target", f"http://{LOOPBACK}:{D.target_port}/", "--new", 10, "--reuse", 10,
            "--warmup", 2, "--out", out, "--seed", 13]
    for name, spec in paths.items():
        argv += ["--path", f"{name}={spec}"]
    r = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        samples = list(csv.DictReader(f))
    check(len(samples) == 4 * 20, len(samples))
    check(all(s["ok"] == "1" for s in samples), [s for s in samples if s["ok"] != "1"][:3])
    check(all(s["route"] == ("direct" if s["path"] == "direct" else "vless") for s in samples),
          [s for s in samples if s["route"] not in ("vless", "direct")][:3])
    check(all(s["transport"] == ("" if s["path"] == "direct" else "grpc") for s in samples),
          [(s["path"], s["transport"]) for s in samples][:4])
    summary = json.loads((out / "summary.json").read_text())
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    print(h.verify_log(RUNNER, D.access, out).rstrip(), flush=True)
    for listener in ("grpc", "h2c"):
        found = wait_sessions(12, mark, listener=listener)
        check(all(s.get("transport") == "grpc" for s in found), found[0])
    tls_found = sessions(mark, listener="grpc")
    check(all(s["alpn"] == "h2" and s["tls_version"] for s in tls_found), tls_found[0])
    check(all(s["tls_version"] == "" for s in sessions(mark, listener="h2c")), "h2c has no TLS")


def curl_grpc(url: str, args: list, body: bytes, path: str = f"/{SERVICE}/Tun",
              content_type: str = "application/grpc") -> tuple[subprocess.CompletedProcess, dict, bytes, str]:
    d = h.tempdir("vlessbench-grpc-curl-")
    (d / "body").write_bytes(body)
    r = h.curl([*args, "-X", "POST", "-H", f"content-type: {content_type}", "-H", "te: trailers",
                "--data-binary", f"@{d / 'body'}", "-D", d / "headers", "-o", d / "out", url + path])
    head = (d / "headers").read_bytes().decode("latin-1") if (d / "headers").exists() else ""
    headers = {}
    for line in head.split("\r\n"):
        if ":" in line and not line.startswith("HTTP/"):
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    out = (d / "out").read_bytes() if (d / "out").exists() else b""
    return r, headers, out, head


@suite.test
def curl_http2_carries_a_hand_built_grpc_body():
    for listener, args, scheme in (("h2c", ["--http2-prior-knowledge"], "http"),
                                   ("grpc", ["--http2", "-k"], "https")):
        mark = D.mark()
        url = f"{scheme}://{LOOPBACK}:{D.port(listener)}"
        path = f"/{SERVICE}/Tun" if listener == "grpc" else "/vlessbench/Tun"
        r, headers, out, head = curl_grpc(url, args, vless_body(), path=path)
        check(r.returncode == 0, (listener, r.returncode, r.stderr))
        check(head.startswith("HTTP/2 200"), head)
        check(headers.get("content-type") == "application/grpc", headers)
        # The trailers come after the body; curl writes them to the header dump.
        check(headers.get("grpc-status") == "0", head)
        payload = unhunk(out)
        check(payload[:2] == b"\x00\x00", payload[:4])
        answer = payload[2:].decode("latin-1")
        check(answer.startswith("HTTP/1.1 200"), answer[:80])
        check(re.search(r"X-Vlessbench-Route: vless session=\d+ user=tester transport=grpc", answer), answer[:600])
        s = wait_sessions(1, mark, listener=listener)[0]
        check(s["transport"] == "grpc" and s["close_reason"] in ("client_eof", "upstream_eof"), s)


@suite.test
def wrong_path_method_or_content_type_is_an_http_error_and_a_reason():
    url = f"http://{LOOPBACK}:{D.port('h2c')}"
    for path, ctype, status, reason in (("/other/Tun", "application/grpc", "404", "wrong_path"),
                                        ("/vlessbench/Tun", "text/plain", "415", "wrong_content_type")):
        mark = D.mark()
        r, headers, _, head = curl_grpc(url, ["--http2-prior-knowledge"], vless_body(), path=path, content_type=ctype)
        check(r.returncode == 0, (reason, r.stderr))
        check(head.startswith(f"HTTP/2 {status}"), (reason, head))
        check(headers.get("grpc-status") == "12" and headers.get("grpc-message") == reason, headers)
        e = D.wait_event("vless.reject", since=mark, reason=reason)
        check(e["listener"] == "h2c" and e["phase"] == "h2", e)
    mark = D.mark()
    r = h.curl(["--http2-prior-knowledge", "-D", "-", "-o", "/dev/null", f"{url}/vlessbench/Tun"])
    check(r.stdout.decode().startswith("HTTP/2 405"), r.stdout)
    D.wait_event("vless.reject", since=mark, reason="wrong_method")


@suite.test
def bad_gun_framing_ends_the_stream_with_grpc_status_13_and_a_reason():
    url = f"http://{LOOPBACK}:{D.port('h2c')}"
    for body, reason in ((b"\x01\x00\x00\x00\x00", "compressed_message"),
                         (b"\x00\x00\x00\x00\x02\x0b\x00", "group_wire_type"),
                         (b"\x00\x7f\xff\xff\xff", "message_too_large")):
        mark = D.mark()
        r, headers, _, head = curl_grpc(url, ["--http2-prior-knowledge"], body, path="/vlessbench/Tun")
        check(r.returncode == 0, (reason, r.stderr))
        check(head.startswith("HTTP/2 200"), head)
        check(headers.get("grpc-status") == "13" and headers.get("grpc-message") == reason, (reason, head))
        e = D.wait_event("vless.reject", since=mark, reason=reason)
        check(e["listener"] == "h2c" and e["phase"] == "header", e)


# --------------------------------------------------------------------------------------------
# Hand-built HTTP/2 (RFC 9113): preface, then 9-byte frame headers



def read_frames(sock: socket.socket, timeout: float = 10.0) -> tuple[list[tuple[int, int, int, bytes]], bool]:
    """Frames until EOF (True) or the timeout (False)."""
    sock.settimeout(0.5)
    buf, frames, end = b"", [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return frames, True
        if not chunk:
            return frames, True
        buf += chunk
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]))
            buf = buf[9 + n:]
    return frames, False


def h2c_connect() -> socket.socket:
    sock = h.tcp_connect(D.port("h2c"), timeout=10)
    sock.sendall(PREFACE + h2frame(SETTINGS, 0, 0))
    return sock


def flood(payload: bytes, reason_prefix: str) -> dict:
    mark = D.mark()
    sock = h2c_connect()
    with sock:
        try:
            for _ in range(50):
                sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        frames, eof = read_frames(sock)
        check(eof, f"connection still open after the flood ({len(frames)} frames)")
    e = D.wait_event("vless.reject", since=mark, pred=lambda e: e["reason"].startswith(reason_prefix))
    check(e["listener"] == "h2c" and e["phase"] == "h2", e)
    return e


@suite.test
def h2_floods_end_the_connection_with_a_reason():
    rss0 = h.rss_kib(D.proc.pid)
    flood(h2frame(PING, 0, 0, b"12345678") * 2000, "h2_flood")
    flood(h2frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 65535)) * 2000, "h2_flood")
    # RST_STREAM storm: open a stream and reset it, over and over (the "rapid reset" pattern).
    storm = b"".join(h2frame(HEADERS, 0x4, sid, request_block()) + h2frame(RST_STREAM, 0, sid, struct.pack(">I", 8))
                     for sid in range(1, 2 * 1500, 2))
    mark = D.mark()
    sock = h2c_connect()
    with sock:
        try:
            sock.sendall(storm)
        except (BrokenPipeError, ConnectionResetError):
            pass
        frames, eof = read_frames(sock)
    goaway = [f for f in frames if f[0] == 7]
    check(eof and goaway, f"eof {eof}, {len(frames)} frames, no GOAWAY")
    # ENHANCE_YOUR_CALM (0xb, RFC 9113 §5.4.1, as docs/sessions.md says), not the INTERNAL_ERROR
    # (2) of nghttp2's own reset rate limit.
    check(struct.unpack(">I", goaway[-1][3][4:8])[0] == 0xB, goaway[-1])
    D.wait_event("vless.reject", since=mark, reason="h2_goaway_sent: ENHANCE_YOUR_CALM")
    # A bad preface.
    mark = D.mark()
    sock = h.tcp_connect(D.port("h2c"), timeout=10)
    with sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        _, eof = read_frames(sock)
        check(eof, "bad preface: closed")
    D.wait_event("vless.reject", since=mark, reason="h2_bad_preface")
    check(D.running(), "daemon alive")
    grown = h.rss_kib(D.proc.pid) - rss0
    check(grown < 64 * 1024, f"RSS grew {grown} KiB over the floods")
    print(f"floods: daemon RSS +{grown} KiB")


@suite.test
def more_streams_than_advertised_are_refused():
    sock = h2c_connect()
    with sock:
        frames = b"".join(h2frame(HEADERS, 0x4, sid, request_block()) for sid in range(1, 2 * 150, 2))
        sock.sendall(frames)
        got, _ = read_frames(sock, timeout=3)
        settings = [f for f in got if f[0] == SETTINGS and f[1] == 0]
        check(settings, "server SETTINGS")
        params = {struct.unpack(">H", settings[0][3][i:i + 2])[0]: struct.unpack(">I", settings[0][3][i + 2:i + 6])[0]
                  for i in range(0, len(settings[0][3]), 6)}
        check(params.get(3) == 100, params)  # SETTINGS_MAX_CONCURRENT_STREAMS
        answered = {f[2] for f in got if f[0] == HEADERS}
        refused = {f[2] for f in got if f[0] == RST_STREAM and struct.unpack(">I", f[3])[0] == 7}
        goaway = [f for f in got if f[0] == 7]
        check(len(answered) <= 100, len(answered))
        check(refused or goaway, "streams over the limit neither refused nor the connection ended")
    check(D.running(), "daemon alive")


@suite.test
def a_stalled_stream_blocks_neither_its_neighbour_nor_memory():
    """Stream 1 asks for 256 MB and never gives the server window to send it; stream 3 on the same
    connection gets its whole answer and trailers, and the daemon does not buffer stream 1."""
    rss0 = h.rss_kib(D.proc.pid)
    mark = D.mark()
    sock = h.tcp_connect(D.port("h2c"), timeout=10)
    with sock:
        def stream(sid: int, path: str) -> bytes:
            request = h.http_request("GET", path, headers={"Connection": "close"})
            body = hunk(h.vless_header(D.uuid, D.target_port)) + hunk(request)
            return h2frame(HEADERS, 0x4, sid, request_block()) + h2frame(DATA, 0, sid, body)
        # Streams start with a send window of 0; the connection's is opened wide.
        sock.sendall(PREFACE + h2frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) +
                     h2frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)) +
                     stream(1, "/bytes/256000000") + stream(3, "/") +
                     h2frame(WINDOW_UPDATE, 0, 3, struct.pack(">I", 1 << 20)))
        sock.settimeout(0.5)
        buf, data3, done3, data1 = b"", b"", False, 0
        end = time.monotonic() + 10
        while not done3 and time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            check(chunk, "connection closed")
            buf += chunk
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n = int.from_bytes(buf[:3], "big")
                kind, flags, sid, payload = buf[3], buf[4], int.from_bytes(buf[5:9], "big"), buf[9:9 + n]
                buf = buf[9 + n:]
                if kind == DATA and sid == 3:
                    data3 += payload
                elif kind == DATA and sid == 1:
                    data1 += len(payload)
                if sid == 3 and flags & 0x1:
                    done3 = True
        check(done3, f"stream 3 did not end ({len(data3)} bytes)")
        answer = unhunk(data3)[2:].decode("latin-1")
        check(answer.startswith("HTTP/1.1 200") and " transport=grpc" in answer, answer[:300])
        check(data1 == 0, f"{data1} bytes sent on stream 1 without window")
        h.wait_sender_stalled(D.target_port)  # the destination has pushed what it can towards stream 1
        grown = h.rss_kib(D.proc.pid) - rss0
        check(grown < 32 * 1024, f"RSS grew {grown} KiB with stream 1 stalled")
        print(f"stream 1 stalled (256 MB asked for, window 0): daemon RSS +{grown} KiB")
    wait_sessions(2, mark, listener="h2c")


@suite.test
def links_print_grpc_for_each_client():
    r = h.run_daemon(["links", "--config", D.config_path, "--host", LOOPBACK, "--no-qr"])
    check(r.returncode == 0, r.stderr)
    text = r.stdout
    check(re.search(rf"^vless://\S+&type=grpc&serviceName={SERVICE}#grpc-tester$", text, re.M), text)
    check(re.search(r"^vless://\S+security=none\S+&type=grpc&serviceName=vlessbench#h2c-tester$", text, re.M), text)
    check("network: grpc\n" in text and f'grpc-service-name: "{SERVICE}"' in text, text)
    check(f'"service_name": "{SERVICE}"' in text and '"type": "grpc"' in text, text)
    check(f'"grpcSettings": {{\n' in text and f'"serviceName": "{SERVICE}"' in text, text)


suite.run()
