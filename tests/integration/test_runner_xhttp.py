#!/usr/bin/env python3
"""The runner's built-in XHTTP client (issue 41 item 4): `vlessbench run` with type=xhttp links.

- Through our daemon's XHTTP listener over HTTP/1.1, TLS (ALPN http/1.1) and plain, in packet-up,
  stream-up and stream-one (the listener's own `links` share link, its mode set): every sample ok,
  routed through a VLESS session whose transport is xhttp, `vlessbench verify` OK.
- Through Xray 25.9.11 as the XHTTP server, over TLS h2 and plain h2c (prior knowledge,
  `alpn=h2&security=none`), in packet-up and stream-one: Xray's VLESS inbound sends each
  connection on through a VLESS outbound to our daemon's raw TLS listener, so every sample's route
  is proven on the target (`vless`, not Xray's own `direct` egress).
- XMUX over h2: every reused sample is a new XHTTP session (its own VLESS session on the target)
  on the path's one shared HTTP/2 connection, marked `shared_h2` in samples.csv and counted in
  summary.json and the table; new-connection samples are not.
- postinterval=: packet-up's reused samples, each a POST, wait for the spacing from the POST
  before (the runner's samples follow each other closely): postinterval=200 puts the reused
  median above 150 ms, postinterval=0 leaves it far below.
A missing xray is a SKIP naming it for the Xray part only (harness/peers.py).
"""
from __future__ import annotations

import csv
import json
import subprocess

import harness as h
from harness import peers
from harness import CLIENT_BIN, LOOPBACK, check, make_cert, tempdir, verify_log

suite = h.Suite("test_runner_xhttp")
h.require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
USER = "tester"
NEW, REUSE = 6, 6

D = h.Daemon({
    "users": [{"name": USER, "uuid": h.new_uuid()}],
    "vless": [{"name": "xh-tls", "listen": f"{LOOPBACK}:{h.free_port()}", "transport": "xhttp", "path": "/xh"},
              {"name": "xh-plain", "listen": f"{LOOPBACK}:{h.free_port()}", "transport": "xhttp", "path": "/xh",
               "tls": False},
              {"name": "tls", "listen": f"{LOOPBACK}:{h.free_port()}"}],
    "target": [{"name": "http", "listen": f"{LOOPBACK}:{h.free_port()}"}],
})
UUID = D.cfg["users"][0]["uuid"]
TARGET = f"http://{LOOPBACK}:{D.target_port}/"


def run(paths: dict[str, str], new: int = NEW, reuse: int = REUSE):
    out = tempdir("vlessbench-xhttp-run-")
    argv = [str(RUNNER), "run", "--target", TARGET, "--new", str(new), "--reuse", str(reuse), "--warmup", "1",
            "--out", str(out), "--seed", "7", "--timeout", "5"]
    for name, link in paths.items():
        argv += ["--path", f"{name}={link}"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, json.loads((out / "summary.json").read_text()), out, r.stdout


def check_paths(rows, summary, names, transport: str) -> None:
    for name in names:
        mine = [s for s in rows if s["path"] == name and int(s["round"]) >= 0]
        check(len(mine) == NEW + REUSE, (name, len(mine)))
        bad = [s for s in mine if s["ok"] != "1"]
        check(not bad, (name, [(s["mode"], s["error"]) for s in bad][:3]))
        check(all(s["route"] == "vless" for s in mine), (name, {s["route"] for s in mine}))
        check(all(s["transport"] == transport for s in mine), (name, {s["transport"] for s in mine}))
    check(summary["route_mismatches"] == 0, summary["route_mismatches"])


@suite.test
def our_listener_over_http11_and_h2():
    """The links as printed (TLS: no alpn, so h2 as Xray picks it) and over HTTP/1.1 (alpn=http/1.1
    on TLS, the plain link as printed), and h2c (alpn=h2 on the plain link): every mode."""
    links = peers.share_links(peers.links_text(D))
    tls, plain = links[f"xh-tls-{USER}"], links[f"xh-plain-{USER}"]
    check("alpn=" not in tls, tls)
    paths = {}
    for mode in ("packet-up", "stream-up", "stream-one"):
        paths[f"tls-h2-{mode}"] = peers.with_params(tls, mode=mode)
        paths[f"tls-h1-{mode}"] = peers.with_params(tls, mode=mode, alpn="http/1.1")
        paths[f"plain-h1-{mode}"] = peers.with_params(plain, mode=mode)
        paths[f"h2c-{mode}"] = peers.with_params(plain, mode=mode, alpn="h2")
    mark = D.mark()
    rows, summary, out, _ = run(paths)
    check_paths(rows, summary, paths, "xhttp")
    h1 = [s for s in rows if "-h1-" in s["path"]]
    check(h1 and all(s["shared_h2"] == "0" for s in h1), "HTTP/1.1 shares no connection")
    # Over h2 a reused sample is a new XHTTP session on the path's one HTTP/2 connection (XMUX).
    h2_reused = [s for s in rows if s["path"].startswith(("tls-h2-", "h2c-")) and s["mode"] == "reuse"
                 and int(s["round"]) >= 0]
    check(len(h2_reused) == 6 * REUSE and all(s["shared_h2"] == "1" for s in h2_reused),
          [(s["path"], s["shared_h2"]) for s in h2_reused][:6])
    # Each new-connection sample is a session of its own on the listener, each logged.
    sessions = D.events("vless.session", since=mark)
    check(len({e["session"] for e in sessions if e.get("transport") == "xhttp"}) >= 12 * (NEW + 1), len(sessions))
    check(any(e.get("reused") for e in sessions), "no session logged as riding a reused HTTP/2 connection")
    verify_log(RUNNER, D.access, out)


def xray_server(port_tls: int, port_h2c: int, cert, key) -> dict:
    inbound = {"listen": LOOPBACK, "protocol": "vless", "settings": {"clients": [{"id": UUID}], "decryption": "none"}}
    xhttp = {"network": "xhttp", "xhttpSettings": {"path": "/xh", "mode": "auto"}}
    return {
        "log": {"loglevel": "warning"},
        "inbounds": [
            {**inbound, "port": port_tls,
             "streamSettings": {**xhttp, "security": "tls",
                                "tlsSettings": {"alpn": ["h2"], "certificates": [{"certificateFile": str(cert),
                                                                                  "keyFile": str(key)}]}}},
            {**inbound, "port": port_h2c, "streamSettings": {**xhttp, "security": "none"}},
        ],
        # Every connection on to our daemon: the target's route header proves it came through.
        "outbounds": [{
            "protocol": "vless",
            "settings": {"vnext": [{"address": LOOPBACK, "port": D.port("tls"),
                                    "users": [{"id": UUID, "encryption": "none"}]}]},
            "streamSettings": {"network": "tcp", "security": "tls",
                               "tlsSettings": {"serverName": "localhost", "allowInsecure": True}},
        }],
    }


def xray_links(port_tls: int, port_h2c: int) -> dict[str, str]:
    base = f"vless://{UUID}@{LOOPBACK}:"
    paths = {}
    for mode in ("packet-up", "stream-one"):
        paths[f"h2-{mode}"] = (f"{base}{port_tls}?encryption=none&security=tls&sni=localhost&allowInsecure=1"
                               f"&type=xhttp&path=%2Fxh&mode={mode}&alpn=h2")
        paths[f"h2c-{mode}"] = f"{base}{port_h2c}?encryption=none&security=none&type=xhttp&path=%2Fxh&mode={mode}&alpn=h2"
    return paths


@suite.test
def xray_server_over_h2_and_h2c():
    peers.require("xray")
    cert, key = make_cert(tempdir())
    port_tls, port_h2c = peers.inbound_port(), peers.inbound_port()
    core = peers.Core("xray", xray_server(port_tls, port_h2c, cert, key), [port_tls, port_h2c])
    try:
        paths = xray_links(port_tls, port_h2c)
        rows, summary, _, stdout = run(paths)
        check_paths(rows, summary, paths, "tls")  # our daemon sees Xray's raw TLS outbound
        print(stdout)
        # XMUX: each reused sample a new XHTTP session on the path's one HTTP/2 connection (the
        # warm-up opened it), each with its own route proof; new ones on fresh connections.
        for name in paths:
            mine = [s for s in rows if s["path"] == name and int(s["round"]) >= 0]
            check(all(s["shared_h2"] == ("1" if s["mode"] == "reuse" else "0") for s in mine),
                  (name, [(s["mode"], s["shared_h2"]) for s in mine]))
            check(len({s["session"] for s in mine if s["mode"] == "reuse"}) == REUSE, name)
            check(summary["paths"][name]["shared_h2"] == {"new": 0, "reuse": REUSE}, summary["paths"][name])
        check("shared HTTP/2 connections (XMUX)" in stdout, stdout)
    finally:
        core.stop()


@suite.test
def packet_up_spacing_is_configurable():
    link = peers.with_params(peers.share_links(peers.links_text(D))[f"xh-plain-{USER}"], mode="packet-up")
    rows, summary, _, _ = run({"slow": peers.with_params(link, postinterval="200"), "fast": peers.with_params(link, postinterval="0")},
                              new=2, reuse=4)
    reused = {name: summary["paths"][name]["reuse"]["median_ms"] for name in ("slow", "fast")}
    check(reused["slow"] > 150, reused)
    check(reused["fast"] < 100, reused)


@suite.test
def clients_carry_xhttp_nodes_through_xray():
    """`vlessbench clients` with an XHTTP node: the built-in client and Xray carry it; sing-box,
    which has no XHTTP, is left out up front (its entry would dial the node as raw VLESS)."""
    xray, sing_box = peers.require("xray"), peers.find("sing-box")
    link = peers.share_links(peers.links_text(D))[f"xh-plain-{USER}"]
    out = tempdir("vlessbench-xhttp-clients-")
    argv = [str(RUNNER), "clients", "--link", link, "--core", f"xray={xray}", "--target", TARGET, "--new", "3",
            "--reuse", "3", "--warmup", "0", "--out", str(out)]
    if sing_box:
        argv += ["--core", f"sing-box={sing_box}", "--cores", "xray,sing-box"]
    else:
        argv += ["--cores", "xray"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    summary = json.loads((out / "summary.json").read_text())
    for name in ("builtin", "xray"):
        p = summary["paths"][name]
        check(p["new"]["failed"] == 0 and p["reuse"]["failed"] == 0 and p["routes"] == {"vless": 6}, (name, p))
    if sing_box:
        check("sing-box has no XHTTP" in r.stderr, r.stderr)
        check("sing-box" not in summary["paths"], list(summary["paths"]))


if __name__ == "__main__":
    suite.run()
