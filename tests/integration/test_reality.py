#!/usr/bin/env python3
"""REALITY (security = "reality", issue 40): one daemon with REALITY listeners on raw TCP
("reality", and "mlkem" with require_mlkem_share), gRPC ("rgrpc") and XHTTP ("rxhttp") in front of its own HTTPS
target, and:

- Xray 25.9.11 (REALITY + Vision) and mihomo 1.19.1 (reality-opts + Vision), each configured from
  the entry `vlessbenchd links` prints for the listener's Vision section and checked by its own
  checker, carry 100 requests of `vlessbench run` (50 new + 50 reused) through their HTTP entry:
  every answer's route a VLESS session, `vlessbench verify` OK, the sessions' lines naming their
  key shares; sing-box 1.11.11's entry is checked and its run skipped (built without uTLS); Xray
  the same through gRPC + REALITY;
- Xray 25.9.11 through XHTTP + REALITY (h2, its XMUX) the same;
- `openssl s_client -servername www.example.com` (an SNI not in server_names) and a ClientHello
  with the right SNI but no REALITY proof (python's ssl: another key, in effect) both get the
  target's certificate, each refusal a vless.reject with its reason and its relay to the target
  (fallback_us, fallback_bytes_up/down, fallback_end); a refused client that keeps the relay open
  is cut at handshake_timeout_ms (fallback_end "deadline");
- the REALITY sessions' lines carry the phases, the listener's policy ("reality" has quickack
  "on", the others the default) and stall_suspected computed from them as for TLS;
- require_mlkem_share: python's X25519-only ClientHello is refused with its reason, Xray's
  (X25519MLKEM768 before X25519) is served;
- hostile: a truncated ClientHello, a 16 KiB one, a ClientHello replayed byte for byte (captured
  from Xray), a listener whose target is down: each a reject with its reason, the daemon serving on;
- the key the daemon makes: kept beside a [tls] generate certificate, or made at each start with
  the certificate in memory; and `vlessbenchd` with no config (the embedded default, in this
  script's own network namespace) serving REALITY + Vision on 8448, its start-up link carried by
  `vlessbench clients` through Xray and mihomo.

A missing core is a SKIP naming it (harness/peers.py).
"""
from __future__ import annotations

import csv
import json
import os
import re
import socket
import ssl
import subprocess
import threading
import time

import harness as h
from harness import peers
from harness import CLIENT_BIN, LOOPBACK, check

h.run_in_own_netns()  # the embedded default's case binds the default ports
suite = h.Suite("test_reality")
h.require_binary()
RUNNER = CLIENT_BIN / "vlessbench"
USER = "tester"
NAME = "reality.vlessbench.test"
# A fixed key pair (`xray x25519`): the links carry its public half.
PRIVATE_KEY = "cKLuCXsNtU6XegVkSNZL_3Sygv78PndIC_i5kdOycEA"
PUBLIC_KEY = "w-pHnSOA-5YebSgBZ49a9v0AVNwww4_AIq7hYf9B3Ek"
COUNT = int(os.environ.get("VLESSBENCH_REALITY_COUNT") or 50)  # new and reused each: 100 requests
# The listeners' client-socket policies: "reality" differs from the default, so the session lines
# show the listener's own.
POLICY = {"reality": {"nodelay": True, "quickack": "on"}}
DEFAULT_POLICY = {"nodelay": True, "quickack": "kernel"}
STALL_US = 30_000  # core/wire/route_header.hpp stall_threshold_us
HANDSHAKE_MS = 3000


def make_daemon() -> h.Daemon:
    port = h.free_port
    reality = {"security": "reality", "private_key": PRIVATE_KEY, "server_names": [NAME],
               "short_ids": ["", "0123abcd"], "max_time_diff": 60000}
    dead = socket.socket()
    dead.bind((LOOPBACK, 0))
    dead_port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    cfg = {
        "users": [{"name": USER, "uuid": h.new_uuid()}],
        "vless": [{"name": "reality", "listen": f"{LOOPBACK}:{port()}", **reality, "tcp": POLICY["reality"]},
                  {"name": "mlkem", "listen": f"{LOOPBACK}:{port()}", **reality, "require_mlkem_share": True},
                  {"name": "rgrpc", "listen": f"{LOOPBACK}:{port()}", **reality, "transport": "grpc"},
                  {"name": "rxhttp", "listen": f"{LOOPBACK}:{port()}", **reality, "transport": "xhttp",
                   "path": "/xh"},
                  {"name": "down", "listen": f"{LOOPBACK}:{port()}", **reality,
                   "target": f"{LOOPBACK}:{dead_port}"}],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"},
                   {"name": "https", "listen": f"{LOOPBACK}:{port()}", "tls": True}],
    }
    # A short handshake deadline: the fallback it cuts is a case below.
    return h.Daemon(cfg, limits={"handshake_timeout_ms": HANDSHAKE_MS})


D = make_daemon()


def links() -> str:
    return peers.links_text(D)


def rejects(listener: str, since: int, count: int = 1, timeout: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = [e for e in D.events("vless.reject", since=since) if e.get("listener") == listener]
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def target_certificate_subject(port: int, server_name: str) -> str:
    """The subject of the certificate python's TLS client gets from port with server_name."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=server_name) as s:
            der = s.getpeercert(binary_form=True)
    r = subprocess.run(["openssl", "x509", "-inform", "der", "-noout", "-subject"], input=der,
                       capture_output=True, timeout=10)
    return r.stdout.decode().strip()


def run_through(core: str, listener: str, heading: str) -> None:
    """core with the listener's Vision entry: COUNT new + COUNT reused requests of the runner through
    its HTTP entry, every route a VLESS session, verify OK, the sessions' key shares logged."""
    peers.require(core)
    entry, socks = peers.inbound_port(), peers.inbound_port()
    text, suffix = peers.core_config(core, links(), heading, entry, socks)
    mark = D.mark()
    with peers.Core(core, text, [entry, socks], suffix=suffix):
        peers.ready_through(core, entry, D.target_port)
        out = h.tempdir("vlessbench-reality-run-")
        r = subprocess.run([str(RUNNER), "run", "--target", f"http://{LOOPBACK}:{D.target_port}/generate_204",
                            "--path", f"{core}=http://{LOOPBACK}:{entry}", "--new", str(COUNT), "--reuse",
                            str(COUNT), "--warmup", "0", "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"{core}: runner rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        h.verify_log(RUNNER, D.access, out)
        with open(out / "samples.csv", newline="") as f:
            rows = [row for row in csv.DictReader(f) if row["path"] == core]
        check(len(rows) == 2 * COUNT and all(row["route"].startswith("vless") for row in rows),
              f"{core}: {len(rows)} samples, routes {sorted(set(row['route'][:5] for row in rows))}")
    sessions = [e for e in D.events("vless.session", since=mark) if e.get("listener") == listener]
    check(sessions, f"{core}: no session on {listener}")
    want = POLICY.get(listener, DEFAULT_POLICY)
    stalls = 0
    for s in sessions:
        check(isinstance(s.get("key_shares"), list) and s["key_shares"], f"{core}: no key shares in {s}")
        check_phases_and_stall(core, s, want)
        stalls += s["stall_suspected"]
    refused = [e for e in D.events("vless.reject", since=mark) if e.get("listener") == listener]
    check(not refused, f"{core}: refused {refused}")
    print(f"{core}: {2 * COUNT} requests through {listener}, {len(sessions)} session(s), key shares "
          f"{sessions[0].get('key_shares')}, policy quickack {want['quickack']}, {stalls} stall(s) suspected")


def check_phases_and_stall(core: str, s: dict, want: dict) -> None:
    """A REALITY session's line: the phases the stall flag reads, the listener's policy, and the
    flag computed as for TLS (header_complete - tls_done >= 30 ms)."""
    p = s.get("phases_us") or {}
    tls_done, header = p.get("tls_done", -1), p.get("header_complete", -1)
    check(0 <= tls_done <= header, f"{core}: phases {p}")
    policy = s.get("policy") or {}
    check(policy.get("quickack") == want["quickack"] and policy.get("nodelay") == want["nodelay"],
          f"{core}: policy {policy}, listener's {want}")
    check(isinstance(s.get("stall_suspected"), bool), f"{core}: no stall_suspected in {s}")
    check(s["stall_suspected"] == (header - tls_done >= STALL_US), f"{core}: stall flag {s}")


def check_fallback(e: dict, ends: set[str], relayed: bool) -> None:
    """A refusal's line carries its relay to the target: time, bytes each way, what ended it."""
    for key in ("fallback_us", "fallback_bytes_up", "fallback_bytes_down", "fallback_end"):
        check(key in e, f"no {key} in {e}")
    check(e["fallback_end"] in ends, f"fallback_end {e['fallback_end']!r}, want one of {sorted(ends)}")
    check(0 <= e["fallback_us"] <= e.get("duration_us", e["fallback_us"]), f"fallback_us {e}")
    if relayed:  # the ClientHello went up, the target's certificate came down
        check(e["fallback_bytes_up"] >= e.get("bytes_seen", 0) and e["fallback_bytes_up"] > 100, f"up {e}")
        check(e["fallback_bytes_down"] > 300, f"down {e}")
    else:
        check(e["fallback_bytes_up"] == 0 and e["fallback_bytes_down"] == 0, f"relayed nothing {e}")


@suite.test
def xray_reality_vision_100():
    run_through("xray", "reality", f"reality-{USER}-vision")


@suite.test
def mihomo_reality_vision_100():
    run_through("mihomo", "reality", f"reality-{USER}-vision")


@suite.test
def xray_reality_grpc_100():
    run_through("xray", "rgrpc", f"rgrpc-{USER}")


@suite.test
def xray_reality_xhttp_100():
    """XHTTP with REALITY as its security: Xray's entry as printed (h2, its XMUX, mode auto)."""
    run_through("xray", "rxhttp", f"rxhttp-{USER}")


@suite.test
def singbox_entry_checked_run_skipped():
    exe = peers.require("sing-box")
    text, _ = peers.core_config("sing-box", links(), f"reality-{USER}-vision", peers.inbound_port(),
                                peers.inbound_port())
    folder = h.tempdir("vlessbench-reality-sing-box-")
    path = folder / "config.json"
    path.write_text(text)
    r = subprocess.run([str(exe), "check", "-c", str(path)], capture_output=True, text=True, timeout=30)
    # This build has no uTLS: its checker refuses what REALITY needs, in its own words.
    out = r.stdout + r.stderr
    check(r.returncode == 0 or "uTLS" in out or "utls" in out, out)
    print(f"sing-box 1.11.11 checker: rc {r.returncode} {out.strip()[:200]!r}; run skipped: built without uTLS")


@suite.test
def links_carry_reality():
    link = peers.share_links(links())[f"reality-{USER}-vision"]
    for part in ("security=reality", f"sni={NAME}", f"pbk={PUBLIC_KEY}", "sid=", "fp=chrome",
                 "flow=xtls-rprx-vision"):
        check(part in link, f"{part} not in {link}")


@suite.test
def unknown_sni_gets_the_target():
    https = D.port("https")
    want = target_certificate_subject(https, "localhost")
    mark = D.mark()
    r = subprocess.run(["openssl", "s_client", "-connect", f"{LOOPBACK}:{D.port('reality')}", "-servername",
                        "www.example.com"], input=b"", capture_output=True, timeout=15)
    subject = re.search(rb"subject=(.*)", r.stdout)
    check(subject is not None, r.stdout[-400:])
    check(want.replace(" ", "").endswith(subject.group(1).decode().replace(" ", "")), f"{subject.group(1)!r} vs {want}")
    got = rejects("reality", mark)
    check(got and got[0]["reason"] == "reality_server_name", got)
    check_fallback(got[0], {"client_eof", "target_eof", "client_error"}, relayed=True)
    print(f"openssl s_client: fallback {got[0]['fallback_us']} us, {got[0]['fallback_bytes_up']} B up, "
          f"{got[0]['fallback_bytes_down']} B down, end {got[0]['fallback_end']}")


@suite.test
def wrong_key_gets_the_target():
    """Python's ClientHello with the right SNI: its session id is no REALITY proof (as one sealed
    with another key), so the target answers."""
    https = D.port("https")
    want = target_certificate_subject(https, "localhost")
    mark = D.mark()
    got_subject = target_certificate_subject(D.port("reality"), NAME)
    check(got_subject == want, f"{got_subject} vs {want}")
    got = rejects("reality", mark)
    check(got and got[0]["reason"] == "reality_auth_failed", got)
    check_fallback(got[0], {"client_eof", "target_eof", "client_error"}, relayed=True)
    print(f"wrong key: fallback {got[0]['fallback_us']} us, {got[0]['fallback_bytes_up']} B up, "
          f"{got[0]['fallback_bytes_down']} B down, end {got[0]['fallback_end']}")


@suite.test
def fallback_cut_at_the_handshake_deadline():
    """A refused client that keeps its connection to the target open: the relay ends at
    handshake_timeout_ms after accept, its end "deadline"."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    mark = D.mark()
    with socket.create_connection((LOOPBACK, D.port("reality")), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=NAME) as s:
            got = rejects("reality", mark, timeout=HANDSHAKE_MS / 1000 + 5)
            s.settimeout(5)
            try:
                closed = s.recv(1) == b""
            except OSError:
                closed = True
    check(got and got[0]["reason"] == "handshake_timeout", got)
    check_fallback(got[0], {"deadline"}, relayed=True)
    check(got[0]["duration_us"] >= HANDSHAKE_MS * 1000, f"cut before the deadline: {got[0]}")
    check(closed, "the connection stayed open after the deadline")
    print(f"deadline: fallback {got[0]['fallback_us']} us, end {got[0]['fallback_end']}")


@suite.test
def mlkem_required_refuses_x25519_only():
    mark = D.mark()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection((LOOPBACK, D.port("mlkem")), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=NAME):
            pass  # the target's handshake
    got = rejects("mlkem", mark)
    check(got and got[0]["reason"] == "reality_mlkem_share_required", got)


@suite.test
def mlkem_required_serves_xray():
    run_through("xray", "mlkem", f"mlkem-{USER}-vision")


def send_hello(port: int, data: bytes, close_write: bool = True) -> None:
    with socket.create_connection((LOOPBACK, port), timeout=5) as s:
        s.sendall(data)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


@suite.test
def hostile_hellos_refused_with_reasons():
    port = D.port("reality")
    mark = D.mark()
    # Truncated: a record header promising 512 bytes, 100 sent, then EOF.
    send_hello(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" + os.urandom(91))
    # 16 KiB: a record longer than TLS allows.
    send_hello(port, b"\x16\x03\x01\x40\x01" + os.urandom(16385))
    got = rejects("reality", mark, 2)
    check([e["reason"] for e in got] == ["reality_bad_client_hello"] * 2, got)


class Recorder:
    """A TCP relay between a client and port that keeps the client's first flight."""

    def __init__(self, port: int):
        self.port = port
        self.sock = socket.create_server((LOOPBACK, 0))
        self.listen_port = self.sock.getsockname()[1]
        self.first = b""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            client, _ = self.sock.accept()
        except OSError:
            return
        upstream = socket.create_connection((LOOPBACK, self.port), timeout=10)

        def pump(a, b, keep):
            try:
                while data := a.recv(65536):
                    if keep and not self.first:
                        self.first = data
                    b.sendall(data)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
        pump(client, upstream, True)

    def close(self) -> None:
        self.sock.close()


@suite.test
def replayed_hello_refused():
    """Xray's first flight captured on its way to the listener, then sent again: refused as a replay."""
    peers.require("xray")
    rec = Recorder(D.port("reality"))
    out = peers.links_json(links(), f"reality-{USER}-vision", "Xray (outbounds):")
    out["settings"]["vnext"][0]["port"] = rec.listen_port
    entry, socks = peers.inbound_port(), peers.inbound_port()
    cfg = {"log": {"loglevel": "warning"},
           "inbounds": [{"listen": LOOPBACK, "port": entry, "protocol": "http", "settings": {}},
                        {"listen": LOOPBACK, "port": socks, "protocol": "socks", "settings": {"auth": "noauth"}}],
           "outbounds": [out]}
    import json
    with peers.Core("xray", json.dumps(cfg), [entry, socks]):
        peers.ready_through("xray", entry, D.target_port)
    rec.close()
    check(rec.first[:1] == b"\x16", f"captured {rec.first[:8]!r}")
    mark = D.mark()
    send_hello(D.port("reality"), rec.first)
    got = rejects("reality", mark)
    check(got and got[0]["reason"] == "reality_replayed", got)


@suite.test
def target_down_refused_and_closed():
    mark = D.mark()
    send_hello(D.port("down"), b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", close_write=False)
    got = rejects("down", mark)
    check(got and got[0]["reason"] == "reality_bad_client_hello", got)
    check_fallback(got[0], {"target_down"}, relayed=False)
    # Still serving.
    check(target_certificate_subject(D.port("reality"), "www.example.com"), "no answer after the refusals")


@suite.test
def generated_key_is_kept_or_refused():
    """A listener without private_key: with [tls] generate the daemon makes the key at its first start
    and keeps it (links print the same pbk= before and after a restart, and `links` before the first
    start says none was made yet); without it, the start refuses with the remedy."""
    folder = h.tempdir("vlessbench-reality-key-")
    listener = {"name": "kept", "listen": f"{LOOPBACK}:{h.free_port()}", "security": "reality",
                "server_names": [NAME]}
    users = [{"name": USER, "uuid": h.new_uuid()}]
    tls = {"cert": str(folder / "cert.pem"), "key": str(folder / "key.pem"), "generate": True}
    cfg = {"users": users, "tls": tls, "vless": [listener],
           "target": [{"name": "https", "listen": f"{LOOPBACK}:{h.free_port()}", "tls": True}]}
    d = h.Daemon(cfg, start=False)
    before = h.run_daemon(["links", "--config", d.config_path])
    check(before.returncode != 0 and "no REALITY key yet" in before.stderr, before.stderr)

    def pbk() -> str:
        r = h.run_daemon(["links", "--config", d.config_path])
        check(r.returncode == 0, r.stderr)
        keys = set(re.findall(r"pbk=([A-Za-z0-9_-]+)", r.stdout))
        check(len(keys) == 1, r.stdout)
        return keys.pop()

    d.start()
    first = pbk()
    check((folder / "reality-kept.key").stat().st_mode & 0o077 == 0, "the key file is readable by others")
    d.stop()
    d.start()
    check(pbk() == first, "the key changed across a restart")
    d.stop()

    # The certificate in memory: a key for this start, in the start-up links; `links` says so.
    cfg_mem = {"users": users, "vless": [listener], "target": [{"name": "web", "listen": f"{LOOPBACK}:{h.free_port()}"}]}
    d2 = h.Daemon(cfg_mem)
    started = re.findall(r"share link \(kept / tester\): (vless://\S+#kept-tester-vision)", d2.stderr())
    check(len(started) == 1 and "pbk=" in started[0] and "flow=xtls-rprx-vision" in started[0], d2.stderr())
    r = h.run_daemon(["links", "--config", d2.config_path])
    check(r.returncode != 0 and "made at each start" in r.stderr, r.stderr)
    d2.stop()

    # A certificate of the user's own: no folder of ours for the key; --check says so before a start.
    cert, key = h.make_cert(h.tempdir("vlessbench-reality-cert-"))
    d3 = h.Daemon({**cfg_mem, "tls": {"cert": str(cert), "key": str(key)}}, start=False)
    r = h.run_daemon(["--check", "--config", d3.config_path])
    check(r.returncode == 1 and "listener kept: security = \"reality\" without private_key needs [tls] generate = true"
          in r.stderr, (r.returncode, r.stdout, r.stderr))


def wait_for_text(path, text: str, proc, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        got = path.read_text(errors="replace")
        if text in got:
            return got
        time.sleep(0.05)
    return path.read_text(errors="replace")


@suite.test
def embedded_default_serves_reality_vision():
    """`vlessbenchd` with no config: its reality listener (8448) prints a Vision link with pbk=,
    refused hellos reach its own HTTPS target (8081), and `vlessbench clients` carries the link
    through Xray and mihomo (sing-box 1.11.11 left out: no uTLS), every answer routed by VLESS."""
    folder = h.tempdir("vlessbench-reality-default-")
    log = folder / "daemon.log"
    with open(log, "wb") as f:
        proc = h.spawn([h.DAEMON], stdout=f, stderr=subprocess.STDOUT, cwd=folder)
    try:
        text = wait_for_text(log, "vlessbenchd ready (", proc)
        check("vlessbenchd ready (" in text, text[-2000:])
        m = re.search(r"share link \(reality / default\): (vless://\S+#reality-default-vision)", text)
        check(m is not None, text[-2000:])
        link = m.group(1)
        for part in ("@127.0.0.1:8448?", "security=reality", "pbk=", "flow=xtls-rprx-vision", "sni=www.example.com"):
            check(part in link, f"{part} not in {link}")
        check(target_certificate_subject(8448, "probe.example") == target_certificate_subject(8081, "localhost"),
              "a refused hello did not reach the HTTPS target")
        cores = [c for c in ("xray", "mihomo", "sing-box") if peers.cores.find(c)]
        check({"xray", "mihomo"} <= set(cores), f"cores found: {cores}")
        out = folder / "run"
        args = [str(RUNNER), "clients", "--link", link, "--no-builtin", "--out", str(out),
                "--target", f"http://{LOOPBACK}:8080/generate_204", "--new", "10", "--reuse", "10", "--warmup", "1"]
        for c in cores:
            args += ["--core", f"{c}={peers.cores.find(c)}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        paths = json.loads((out / "summary.json").read_text())["paths"]
        check({"xray", "mihomo"} <= set(paths), sorted(paths))
        for name in ("xray", "mihomo"):
            check(paths[name]["new"]["failed"] == 0 and paths[name]["new"]["n"] == 10, (name, paths[name]))
        with open(out / "samples.csv", newline="") as f:
            rows = [row for row in csv.DictReader(f) if row["path"] in ("xray", "mihomo")]
        check(len(rows) == 40 and all(row["route"].startswith("vless") for row in rows),
              sorted(set(row["route"][:10] for row in rows)))
        if "sing-box" in cores:
            check("sing-box" not in paths and "sing-box" in r.stderr, r.stderr)
            print("sing-box:", [line for line in r.stderr.splitlines() if "sing-box" in line][:2])
    finally:
        h.stop_process(proc)


if __name__ == "__main__":
    suite.run()
