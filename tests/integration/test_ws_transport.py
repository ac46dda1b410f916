#!/usr/bin/env python3
"""WebSocket and HTTPUpgrade transports (issue 13, docs/sessions.md "Transports").

- The one built-in client (`vlessbench run`) over ws, ws with early data, httpupgrade and ws over
  plain TCP: every sample relayed, the route proof intact, the access log naming the transport
  and the early data.
- The real v2ray 4.34 client over ws/TLS, with and without maxEarlyData, driven through its HTTP
  inbound with CONNECT (curl -p -x): the route header names the transport; 4.34 sends no early
  data (docs/methodology.md), so both configurations pay the upgrade round trip.
- A raw RFC 6455 client: early data in Sec-WebSocket-Protocol (echoed in the 101), fragments with a
  ping in between (answered with a pong), the close handshake.
- Hostile: an unmasked client frame, an oversized frame, bad early data (not base64, too long),
  a wrong path (404), no Upgrade header (426), a slow upgrade (cut at the handshake deadline):
  each a vless.reject with its reason, never a hang.
"""
from __future__ import annotations

import base64
import csv
import subprocess
import json
import os
import re
import struct
import time

import harness as h
from harness import LOOPBACK, check

suite = h.Suite("test_ws_transport")
h.require_binary()
# The sanitizer trees build the daemon, not always the runner: there the daemon under test is
# driven by the Release tree's runner (the client is not what that run checks).
RUNNER = h.CLIENT_BIN / "vlessbench"
if not RUNNER.exists():
    RUNNER = h.REPO / "build" / "bin" / "vlessbench"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3


def make_daemon() -> h.Daemon:
    uuid = h.new_uuid()
    port = h.free_port
    cfg = {
        "users": [{"name": "tester", "uuid": uuid}],
        "vless": [
            {"name": "tls", "listen": f"{LOOPBACK}:{port()}"},
            {"name": "ws", "listen": f"{LOOPBACK}:{port()}", "transport": "ws", "path": "/ws",
             "max_early_data": 2048},
            {"name": "up", "listen": f"{LOOPBACK}:{port()}", "transport": "httpupgrade", "path": "/up"},
            {"name": "wsplain", "listen": f"{LOOPBACK}:{port()}", "transport": "ws", "path": "/ws", "tls": False,
             "max_early_data": 64},
        ],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
        # Short, so that the slow-upgrade check ends in seconds.
        "limits": {"handshake_timeout_ms": 1500},
    }
    return h.Daemon(cfg)


D = make_daemon()


def link(listener: str, query: str) -> str:
    return f"vless://{D.uuid}@{LOOPBACK}:{D.port(listener)}?encryption=none&{query}#{listener}"


# --------------------------------------------------------------------------------------------
# A raw RFC 6455 client

frame = h.ws_frame
read_frame = h.read_ws_frame


def upgrade_head(path: str, extra: dict | None = None, upgrade: bool = True) -> bytes:
    headers = {"Host": "localhost"}
    if upgrade:
        headers.update({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": KEY,
                        "Sec-WebSocket-Version": "13"})
    headers.update(extra or {})
    return (f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def get_request(path: str = "/") -> bytes:
    return h.http_request("GET", path, headers={"Connection": "close"})


def tls_client(listener: str) -> h.TlsClient:
    return h.TlsClient(D.port(listener), timeout=10).handshake()


def plain_client(listener: str) -> tuple:
    sock = h.tcp_connect(D.port(listener), timeout=10)
    return sock, h.plain_stream(sock)


def reject_after(mark: int, reason: str, timeout: float = 5.0) -> dict:
    return D.wait_event("vless.reject", timeout=timeout, since=mark, reason=reason)


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


# --------------------------------------------------------------------------------------------

@suite.test
def builtin_client_over_each_transport():
    mark = D.mark()
    out = h.tempdir("vlessbench-ws-run-")
    tls = "security=tls&sni=localhost&allowInsecure=1"
    paths = {
        "tls": link("tls", f"{tls}&type=tcp"),
        "ws": link("ws", f"{tls}&type=ws&path=%2Fws"),
        "wsed": link("ws", f"{tls}&type=ws&path=%2Fws&ed=2048"),
        "up": link("up", f"{tls}&type=httpupgrade&path=%2Fup"),
        "wsplain": link("wsplain", "security=none&type=ws&path=%2Fws"),
    }
    argv = [str(RUNNER), "run", "--target", f"http://{LOOPBACK}:{D.target_port}/", "--new", 10, "--reuse", 10,
            "--warmup", 2, "--out", out, "--seed", 13]
    for name, spec in paths.items():
        argv += ["--path", f"{name}={spec}"]
    r = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        samples = list(csv.DictReader(f))
    check(len(samples) == 6 * 20, len(samples))
    check(all(s["ok"] == "1" for s in samples), [s for s in samples if s["ok"] != "1"][:3])
    check(all(s["route"] == ("direct" if s["path"] == "direct" else "vless") for s in samples),
          [s for s in samples if s["route"] not in ("vless", "direct")][:3])
    # The runner's CSV names each sample's transport, and new connections over ws/httpupgrade carry
    # the server's upgrade phase.
    want_transport = {"tls": "tls", "ws": "ws", "wsed": "ws", "up": "httpupgrade", "wsplain": "ws", "direct": ""}
    check(all(s["transport"] == want_transport[s["path"]] for s in samples),
          [(s["path"], s["transport"]) for s in samples if s["transport"] != want_transport[s["path"]]][:3])
    upgraded_new = [s for s in samples if s["mode"] == "new" and s["path"] in ("ws", "wsed", "up", "wsplain")]
    check(all(s["upgrade_ms"] != "" and float(s["upgrade_ms"]) >= 0 for s in upgraded_new), upgraded_new[:2])
    check(all(s["upgrade_ms"] == "" for s in samples if s["path"] in ("tls", "direct")), "upgrade on tls/direct")
    summary = json.loads((out / "summary.json").read_text())
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])
    print(h.verify_log(RUNNER, D.access, out).rstrip(), flush=True)
    # Each path's sessions on its listener, named by their transport; warm-ups included.
    ws_sessions = wait_sessions(2 * (10 + 2) + 2, mark, listener="ws")
    for listener, transport in (("tls", None), ("ws", "ws"), ("up", "httpupgrade"), ("wsplain", "ws")):
        found = wait_sessions(12, mark, listener=listener)
        check(all(s.get("transport") == transport for s in found), (listener, found[0]))
        if transport:
            check(all(s["phases_us"]["upgrade_done"] >= 0 for s in found), found[0])
        else:  # raw TLS lines are as they were: no transport, no upgrade phase
            check(all("upgrade_done" not in s["phases_us"] and "early_data" not in s for s in found), found[0])
    check(all(s["tls_version"] == "" and s["phases_us"]["tls_done"] == -1
              for s in sessions(mark, listener="wsplain")), "plain TCP below ws")
    # ed=2048: the VLESS header (and the request after it) came with the upgrade request.
    early = [s for s in ws_sessions if s["early_data"] > 0]
    late = [s for s in ws_sessions if s["early_data"] == 0]
    check(len(early) >= 12 and len(late) >= 12, (len(early), len(late)))
    check(all(s["early_data"] > 26 for s in early), early[0])  # the header and at least part of the GET


@suite.test
def raw_websocket_early_data_fragments_ping_close():
    mark = D.mark()
    header = h.vless_header(D.uuid, D.target_port)
    request = get_request("/")
    with tls_client("ws") as c:
        # Early data: the VLESS header only; the GET follows in two fragments with a ping between.
        c.send(upgrade_head("/ws?ed=2048", {"Sec-WebSocket-Protocol": b64url(header)}))
        resp = c.stream.read_response(head_only=True)
        check(resp.status == 101, resp)
        check(resp.headers.get("sec-websocket-accept") == ACCEPT, resp.headers)
        check(resp.headers.get("sec-websocket-protocol") == b64url(header), resp.headers)
        c.send(frame(0x2, request[:10], fin=False) + frame(0x9, b"are you there") + frame(0x0, request[10:]))
        payload = b""
        pongs = []
        deadline = time.monotonic() + 10
        while b"\r\n\r\n" not in payload[2:] and time.monotonic() < deadline:
            op, data = read_frame(c.stream)
            if op == 0xA:
                pongs.append(data)
            else:
                check(op == 0x2, f"opcode {op}")
                payload += data
        check(pongs == [b"are you there"], pongs)
        check(payload[:2] == b"\x00\x00", payload[:2])
        head = payload[2:].split(b"\r\n\r\n")[0].decode()
        check("HTTP/1.1 200" in head, head)
        check("X-Vlessbench-Route: vless session=" in head and " transport=ws" in head, head)
        check("upgrade;dur=" in head, head)
        # The close handshake: our close frame, the server's answer (after the relay ends).
        c.send(frame(0x8, struct.pack(">H", 1000)))
        op = None
        while op != 0x8:
            op, data = read_frame(c.stream)
        check(struct.unpack(">H", data[:2])[0] == 1000, data)
    s = wait_sessions(1, mark, listener="ws")[0]
    check(s["early_data"] == len(header), s)
    check(s["close_reason"] in ("client_eof", "upstream_eof"), s)


@suite.test
def httpupgrade_stream_right_behind_the_request():
    mark = D.mark()
    with tls_client("up") as c:
        # No waiting for the 101: the VLESS stream follows the head in the same write.
        head = b"GET /up HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        c.send(head + h.vless_header(D.uuid, D.target_port) + get_request("/"))
        resp = c.stream.read_response(head_only=True)
        check(resp.status == 101, resp)
        check("sec-websocket-accept" not in resp.headers, resp.headers)
        h.read_vless_response_header(c.stream)
        answer = c.stream.read_response()
        check(answer.status == 200, answer)
        check(answer.headers["x-vlessbench-route"].endswith(" transport=httpupgrade"), answer.headers)
    s = wait_sessions(1, mark, listener="up")[0]
    check(s["transport"] == "httpupgrade" and s["early_data"] > 0, s)


def v2ray_ws_config(http_port: int, early: bool) -> dict:
    cfg = h.v2ray_client_config(http_port, D.port("ws"), D.uuid)
    ws = {"path": "/ws"}
    if early:
        ws.update({"maxEarlyData": 2048, "earlyDataHeaderName": "Sec-WebSocket-Protocol"})
    cfg["outbounds"][0]["streamSettings"].update({"network": "ws", "wsSettings": ws})
    return cfg


@suite.test
def v2ray_434_client_over_ws_with_and_without_max_early_data():
    for early in (False, True):
        mark = D.mark()
        http_port = h.free_port()
        with h.V2ray(v2ray_ws_config(http_port, early), http_port) as v:
            for _ in range(3):
                r = h.curl(["-p", "-x", f"http://{LOOPBACK}:{http_port}", "-D", "-", "-o", "/dev/null",
                            f"http://{LOOPBACK}:{D.target_port}/"])
                check(r.returncode == 0, f"curl rc {r.returncode}: {r.stderr}\n{v.output()}")
                headers = h.curl_headers(r.stdout)
                check(headers.get("x-vlessbench-route", "").endswith(" transport=ws"), (early, headers))
                check("upgrade;dur=" in headers.get("server-timing", ""), headers)
            found = wait_sessions(3, mark, listener="ws")
        check(all(s["transport"] == "ws" and s["tls_version"] for s in found), found[0])
        # v2ray 4.34 predates maxEarlyData (v4.37): the key is ignored and nothing rides along.
        check(all(s["early_data"] == 0 for s in found), (early, [s["early_data"] for s in found]))


def sections(text: str) -> dict[str, str]:
    """`vlessbenchd links` output by "## NAME" section."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^## (\S+) .*?\n(.*?)(?=^## |\Z)", text, re.S | re.M)}


def json_after(section: str, title: str) -> dict:
    return json.loads(re.search(re.escape(title) + r"\n(\{.*?\n\})\n", section, re.S).group(1))


@suite.test
def links_name_each_transport_and_v2ray_runs_the_printed_ws_outbound():
    r = h.run_daemon(["links", "--config", D.config_path, "--host", LOOPBACK, "--no-qr"])
    check(r.returncode == 0, r.stderr)
    parts = sections(r.stdout)
    # A raw-TLS listener also gets its Vision section (issue 29); the other transports do not.
    check(set(parts) == {"tls-tester", "tls-tester-vision", "ws-tester", "up-tester", "wsplain-tester"}, list(parts))
    ws = parts["ws-tester"]
    check(re.search(r"^vless://\S+&type=ws&path=%2Fws&ed=2048#ws-tester$", ws, re.M), ws)
    check("network: ws\n" in ws and "max-early-data: 2048\n" in ws and 'path: "/ws"' in ws, ws)
    sing = json_after(ws, "sing-box (outbounds):")
    check(sing["transport"] == {"type": "ws", "path": "/ws", "max_early_data": 2048,
                                "early_data_header_name": "Sec-WebSocket-Protocol"}, sing)
    v2 = json_after(ws, "v2ray / Xray (outbounds):")
    check(v2["streamSettings"]["wsSettings"]["maxEarlyData"] == 2048, v2)
    up = parts["up-tester"]
    check(re.search(r"^vless://\S+&type=httpupgrade&path=%2Fup#up-tester$", up, re.M), up)
    check("v2ray-http-upgrade: true" in up, up)
    check(json_after(up, "sing-box (outbounds):")["transport"] == {"type": "httpupgrade", "path": "/up"}, up)
    check(json_after(up, "v2ray / Xray (outbounds):")["streamSettings"]["network"] == "httpupgrade", up)
    plain = parts["wsplain-tester"]
    check("security=none" in plain and "tls: false" in plain, plain)
    check("tls" not in json_after(plain, "sing-box (outbounds):"), plain)
    tls = parts["tls-tester"]
    check("&type=tcp#tls-tester" in tls and "ws-opts" not in tls, tls)
    # The printed v2ray outbound, pasted into v2ray 4.34 behind an http inbound, reaches the target.
    http_port = h.free_port()
    cfg = h.v2ray_client_config(http_port, D.port("ws"), D.uuid)
    cfg["outbounds"] = [v2]
    mark = D.mark()
    with h.V2ray(cfg, http_port) as v:
        r = h.curl(["-p", "-x", f"http://{LOOPBACK}:{http_port}", "-D", "-", "-o", "/dev/null",
                    f"http://{LOOPBACK}:{D.target_port}/"])
        check(r.returncode == 0, f"curl rc {r.returncode}: {r.stderr}\n{v.output()}")
        check(h.curl_headers(r.stdout)["x-vlessbench-route"].endswith(" transport=ws"), r.stdout)
    wait_sessions(1, mark, listener="ws")


def expect_http_reject(send: bytes, status: int, reason: str, listener: str = "wsplain") -> None:
    mark = D.mark()
    sock, stream = plain_client(listener)
    with sock:
        sock.sendall(send)
        resp = stream.read_response()
        check(resp.status == status, (reason, resp))
        check(resp.body.decode().strip() == reason, resp.body)
        check(stream.at_eof(), "connection closed after the error")
    e = reject_after(mark, reason)
    check(e["listener"] == listener and e["phase"] == "tls", e)


@suite.test
def hostile_upgrades_get_an_http_error_and_a_reason():
    expect_http_reject(upgrade_head("/nope"), 404, "wrong_path")
    expect_http_reject(upgrade_head("/ws", upgrade=False), 426, "no_upgrade")
    expect_http_reject(upgrade_head("/ws", {"Sec-WebSocket-Protocol": "not*base64!"}), 400, "bad_early_data")
    expect_http_reject(upgrade_head("/ws", {"Sec-WebSocket-Protocol": b64url(b"x" * 65)}), 400,
                       "early_data_too_long")
    expect_http_reject(upgrade_head("/ws", {"Sec-WebSocket-Key": "short"}), 400, "bad_websocket_key")
    # Over TLS too: the same answer inside the TLS stream.
    mark = D.mark()
    with tls_client("ws") as c:
        c.send(upgrade_head("/elsewhere"))
        check(c.stream.read_response().status == 404, "404 over TLS")
    reject_after(mark, "wrong_path")


@suite.test
def hostile_frames_end_the_connection_with_a_reason():
    # An unmasked client frame, over TLS.
    mark = D.mark()
    with tls_client("ws") as c:
        c.send(upgrade_head("/ws"))
        check(c.stream.read_response(head_only=True).status == 101, "101")
        c.send(frame(0x2, h.vless_header(D.uuid, D.target_port), mask=False))
        check(c.stream.at_eof(), "closed after an unmasked frame")
    reject_after(mark, "unmasked_client_frame")
    # A frame over the 1 MiB cap: refused from its header, before its payload.
    mark = D.mark()
    sock, stream = plain_client("wsplain")
    with sock:
        sock.sendall(upgrade_head("/ws"))
        check(stream.read_response(head_only=True).status == 101, "101")
        sock.sendall(bytes([0x82, 0xFF]) + struct.pack(">Q", 2 << 20) + os.urandom(4))
        check(stream.at_eof(), "closed after an oversized frame header")
    reject_after(mark, "frame_too_large")
    # A text frame: VLESS travels in binary frames.
    mark = D.mark()
    sock, stream = plain_client("wsplain")
    with sock:
        sock.sendall(upgrade_head("/ws") + frame(0x1, b"hello"))
        check(stream.read_response(head_only=True).status == 101, "101")
        check(stream.at_eof(), "closed after a text frame")
    reject_after(mark, "text_frame")


@suite.test
def slow_upgrade_is_cut_at_the_handshake_deadline():
    mark = D.mark()
    sock, stream = plain_client("wsplain")
    with sock:
        t0 = time.monotonic()
        sock.sendall(upgrade_head("/ws")[:20])  # a head that never ends
        check(stream.at_eof(), "closed at the deadline")
        waited = time.monotonic() - t0
    check(1.0 < waited < 8.0, f"closed after {waited:.2f} s (handshake_timeout_ms = 1500)")
    e = reject_after(mark, "handshake_timeout")
    check(e["listener"] == "wsplain", e)


@suite.test
def a_reload_that_changes_only_the_transport_says_so_and_serves_it():
    # The listener keeps its socket; connections accepted after the reload get the new transport,
    # and the reload's line names both (server/reload_plan.cpp).
    port = h.free_port()
    admin_port = h.free_port()
    cfg = {"users": [{"name": "tester", "uuid": D.uuid}],
           "vless": [{"name": "x", "listen": f"{LOOPBACK}:{port}"}],
           "target": [{"name": "http", "listen": f"{LOOPBACK}:{h.free_port()}"}],
           "admin": {"listen": f"{LOOPBACK}:{admin_port}"}}
    d = h.Daemon(cfg)

    def listed_transport() -> str:
        # The dashboard's listener row: the listener's runtime (core/runtime/listener_runtime.hpp).
        with h.tcp_connect(admin_port) as sock:
            sock.sendall(h.http_request("GET", "/api/state", host=LOOPBACK))
            r = h.plain_stream(sock).read_response()
        check(r.status == 200, r)
        return next(l for l in json.loads(r.body)["listeners"] if l["name"] == "x")["transport"]
    try:
        check(listed_transport() == "tls", "before the reload")
        def one(query: str) -> subprocess.CompletedProcess:
            spec = f"vless://{D.uuid}@{LOOPBACK}:{port}?encryption=none&security=tls&sni=localhost&allowInsecure=1&{query}#x"
            return subprocess.run([str(RUNNER), "run", "--target", f"http://{LOOPBACK}:{d.target_port}/", "--new", "2",
                                   "--reuse", "1", "--warmup", "0", "--out", str(h.tempdir("vlessbench-ws-reload-")),
                                   "--path", f"x={spec}"], capture_output=True, text=True, timeout=60)
        r = one("type=tcp")
        check(r.returncode == 0, r.stdout + r.stderr)
        cfg["vless"][0].update({"transport": "ws", "path": "/w"})
        ev = d.reload(cfg)
        check(ev.get("ok"), ev)
        d.wait_stderr('vless "x" on', "; transport tls -> ws path=/w")  # the "reload ok" line
        r = one("type=ws&path=%2Fw")
        check(r.returncode == 0, r.stdout + r.stderr)
        check(listed_transport() == "ws", "the listener's runtime after the reload")
        r = one("type=tcp")
        check(r.returncode != 0, "raw TLS still served after the reload to ws")
    finally:
        d.stop()


suite.run()
