"""Daemon lifecycle: --check, start-up errors, SIGHUP reloads, SIGTERM drain."""
import copy
import signal
import socket
import ssl
import threading
import time

from harness import (SANITIZED, Daemon, Suite, TlsClient, check, free_port, http_request, new_uuid, plain_stream,
                     policy, port_open, read_vless_response_header, require_binary, run_daemon, tcp_connect,
                     tempdir, toml_text, vless_get, vless_header, make_cert, read_events, route_session, wait_server_read)

suite = Suite("test_lifecycle")
require_binary()
# Exit-time bounds of the drain checks, below their 5 s drain deadline even for the sanitizer trees.
EXIT_SLACK = 2.5 if SANITIZED else 1.0


def base_cfg(**limits) -> dict:
    cfg = {
        "users": [{"name": "carol", "uuid": new_uuid()}],
        "vless": [{"name": "v", "listen": f"127.0.0.1:{free_port()}", "tcp": policy(True, "kernel")}],
        "target": [{"name": "t1", "listen": f"127.0.0.1:{free_port()}"},
                   {"name": "t2", "listen": f"127.0.0.1:{free_port()}"}],
    }
    if limits:
        cfg["limits"] = dict(limits)
    return cfg


def session_line(d: Daemon, mark: int, path: str = "/") -> dict:
    resp, _ = vless_get(d.port("v"), d.uuid, d.port("t1"), path)
    check(resp.status == 200, resp)
    sid = route_session(resp.headers["x-vlessbench-route"])
    return d.wait_event("vless.session", since=mark, session=sid)


# ---------------------------------------------------------------------------------------------
# --check and start-up errors

@suite.test
def check_accepts_a_certificate_still_to_generate():
    # The unit runs --check before every start: on the first one the generated certificate does
    # not exist yet. --check must pass without writing it; the daemon then makes it.
    d = tempdir()
    cfg = base_cfg()
    cfg["tls"] = {"cert": str(d / "cert.pem"), "key": str(d / "key.pem"), "generate": True}
    path = d / "gen.toml"
    path.write_text(toml_text(cfg))
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr))
    check("the daemon generates a self-signed certificate there" in r.stderr, r.stderr)
    check(not (d / "cert.pem").exists() and not (d / "key.pem").exists(), "--check wrote files")
    with Daemon(cfg) as daemon:
        check((d / "cert.pem").exists() and (d / "key.pem").exists(), daemon.stderr())
        check(oct((d / "key.pem").stat().st_mode & 0o777) == "0o600", "key file mode")
    r = run_daemon(["--check", "--config", path])
    check(r.returncode == 0 and r.stdout.strip() == "ok" and "generated" not in r.stderr, r.stderr)


@suite.test
def check_ok_and_errors():
    d = tempdir()
    good = d / "good.toml"
    good.write_text(toml_text(base_cfg()))
    r = run_daemon(["--check", "--config", good])
    check(r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr))

    bad = d / "bad.toml"
    cfg = base_cfg()
    cfg["target"][1]["listen"] = "127.0.0.1:99999"
    text = toml_text(cfg)
    bad.write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "99999" in l)
    r = run_daemon(["--check", "--config", bad])
    check(r.returncode == 1, (r.returncode, r.stderr))
    check(r.stdout.strip() != "ok", r.stdout)
    check(f"bad.toml:{line}:" in r.stderr and "target[1].listen" in r.stderr and "99999" in r.stderr, r.stderr)

    typo = d / "typo.toml"
    typo.write_text("[log]\nlevle = \"debug\"\n")
    r = run_daemon(["--check", "--config", typo])
    check(r.returncode == 1 and "typo.toml:2:" in r.stderr and "levle" in r.stderr, r.stderr)

    syntax = d / "syntax.toml"
    syntax.write_text("[log]\nlevel = \"info\"\n[[vless]\nname = 1\n")
    r = run_daemon(["--check", "--config", syntax])
    check(r.returncode == 1 and "syntax.toml:3" in r.stderr, r.stderr)

    r = run_daemon(["--check", "--config", d / "missing.toml"])
    check(r.returncode == 1 and "missing.toml" in r.stderr, r.stderr)
    r = run_daemon(["--check"])
    check(r.returncode != 0 and "--config" in r.stderr, r.stderr)

    # The same error stops a real start, with a non-zero exit.
    r = run_daemon(["--config", bad], timeout=10)
    check(r.returncode != 0 and "99999" in r.stderr, (r.returncode, r.stderr))


@suite.test
def bind_failure_names_listener():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = base_cfg()
        cfg["target"][1] = {"name": "occupied", "listen": f"127.0.0.1:{port}"}
        d = Daemon(cfg, start=False)
        r = run_daemon(["--config", d.config_path], timeout=10)
        check(r.returncode != 0, (r.returncode, r.stderr))
        check("occupied" in r.stderr and str(port) in r.stderr, r.stderr)
        check("terminate" not in r.stderr and "Aborted" not in r.stderr, r.stderr)
        check(not port_open(d.port("v")), "listeners left open after a failed start")


@suite.test
def exposed_listener_needs_users():
    cfg = base_cfg()
    del cfg["users"]
    cfg["vless"][0]["listen"] = f"0.0.0.0:{free_port()}"
    d = Daemon(cfg, start=False)
    for args in (["--config", d.config_path], ["--check", "--config", d.config_path]):
        r = run_daemon(args, timeout=10)
        check(r.returncode != 0, (args, r.returncode, r.stderr))
        check("[[users]]" in r.stderr and "0.0.0.0" in r.stderr, r.stderr)
    # Loopback only and no users: starts, with a random user "default".
    cfg = base_cfg()
    del cfg["users"]
    with Daemon(cfg) as d2:
        d2.wait_stderr("vless://", "default")


@suite.test
def tls_cert_from_files():
    cfg = base_cfg()
    cert, key = make_cert(tempdir())
    cfg["tls"] = {"cert": str(cert), "key": str(key), "min_version": "1.3"}
    with Daemon(cfg) as d:
        mark = d.mark()
        s = session_line(d, mark)
        check(s["tls_version"] == "TLSv1.3", s)
        # A TLS 1.2-only client is refused by min_version = "1.3".
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", d.port("v")), timeout=5) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname="localhost"):
                    ok = True
            except (ssl.SSLError, ConnectionError):
                ok = False
        check(not ok, "TLS 1.2 accepted with min_version 1.3")
        d.wait_event("vless.reject", reason="tls_handshake_failed")
    cfg["tls"]["key"] = str(cert)  # a cert is no key
    d = Daemon(cfg, start=False)
    r = run_daemon(["--check", "--config", d.config_path])
    check(r.returncode == 1 and "tls.key" in r.stderr, r.stderr)


# ---------------------------------------------------------------------------------------------
# SIGHUP

@suite.test
def reload_changes_policy():
    cfg = base_cfg()
    with Daemon(cfg) as d:
        s1 = session_line(d, d.mark())
        check(s1["policy"]["quickack"] == "kernel" and s1["policy"]["nodelay"] is True, s1)
        check(s1["policy"]["generation"] == 1, s1)
        # A session open across the reload.
        spanning = TlsClient(d.port("v")).handshake()
        spanning.send(vless_header(d.uuid, d.port("t1")) + http_request("GET", "/"))
        read_vless_response_header(spanning.stream)
        r = spanning.stream.read_response()
        sid = route_session(r.headers["x-vlessbench-route"])

        new = copy.deepcopy(d.cfg)
        new["vless"][0]["tcp"] = policy(False, "on")
        new["vless"][0]["upstream_tcp"] = policy(False, "off")
        ev = d.reload(new)
        check(ev["ok"] is True and ev["generation"] == 2, ev)
        s2 = session_line(d, d.mark())
        check(s2["policy"]["quickack"] == "on" and s2["policy"]["nodelay"] is False, s2)
        check(s2["policy"]["upstream_quickack"] == "off" and s2["policy"]["upstream_nodelay"] is False, s2)
        check(s2["policy"]["generation"] == 2, s2)

        # The spanning session still works; its line shows the policy it was accepted with, and
        # that policy's generation (not a mix of the old policy and the new generation).
        spanning.send(http_request("GET", "/", headers={"Connection": "close"}))
        check(spanning.stream.read_response().status == 200)
        spanning.close()
        s0 = d.wait_event("vless.session", session=sid)
        p = s0["policy"]
        check((p["quickack"], p["upstream_quickack"], p["generation"]) == ("kernel", "kernel", 1), s0)
        d.wait_stderr("reload ok", "generation 2")


@suite.test
def reload_adds_and_removes_listeners():
    cfg = base_cfg()
    with Daemon(cfg) as d:
        t1, t2 = d.port("t1"), d.port("t2")
        # Open keep-alive connections on listeners that stay: one direct, one through VLESS.
        direct = tcp_connect(t1)
        ds = plain_stream(direct)
        ds.send(http_request("GET", "/", headers={"X-Vlessbench-Seq": "before"}))
        check(ds.read_response().status == 200)
        tunnel = TlsClient(d.port("v")).handshake()
        tunnel.send(vless_header(d.uuid, t1) + http_request("GET", "/"))
        read_vless_response_header(tunnel.stream)
        r = tunnel.stream.read_response()
        route = r.headers["x-vlessbench-route"]
        check(r.status == 200 and route.startswith("vless"), r)

        new = copy.deepcopy(d.cfg)
        t3 = free_port()
        new["target"] = [new["target"][0], {"name": "t3", "listen": f"127.0.0.1:{t3}"}]
        ev = d.reload(new)
        check(ev["ok"] is True and ev["generation"] == 2, ev)
        check(port_open(t3), "added listener not open")
        deadline = time.monotonic() + 3
        while port_open(t2) and time.monotonic() < deadline:
            time.sleep(0.05)
        check(not port_open(t2), "removed listener still accepting")
        r = plain_stream(tcp_connect(t3))
        r.send(http_request("GET", "/generate_204", headers={"Connection": "close"}))
        check(r.read_response().status == 204)
        d.wait_event("http.request", listener="t3")

        # The open connections did not notice.
        ds.send(http_request("GET", "/bytes/10", headers={"X-Vlessbench-Seq": "after"}))
        check(ds.read_response().status == 200)
        tunnel.send(http_request("GET", "/bytes/10"))
        r = tunnel.stream.read_response()
        check(r.status == 200 and r.headers["x-vlessbench-route"] == route, r)
        e1 = d.wait_event("http.request", seq="before")
        e2 = d.wait_event("http.request", seq="after")
        check(e1["peer"] == e2["peer"], (e1, e2))
        direct.close()
        tunnel.close()
        d.wait_stderr('closed target "t2"', 'opened target "t3"')


@suite.test
def reload_swaps_ports_between_listeners():
    # The reload diffed listeners by (kind, endpoint): a port moving from a target to a VLESS
    # listener meant binding it while the old listener still held it ("Address already in use"),
    # so the whole reload failed. Swap a VLESS and a target port, and two targets' names and ports.
    cfg = base_cfg()
    with Daemon(cfg) as d:
        v, t1, t2 = d.port("v"), d.port("t1"), d.port("t2")
        direct = tcp_connect(t1)  # open on the old target, kept across the swap
        ds = plain_stream(direct)
        ds.send(http_request("GET", "/", headers={"X-Vlessbench-Seq": "before-swap"}))
        check(ds.read_response().status == 200)
        new = copy.deepcopy(d.cfg)
        new["vless"][0]["listen"] = f"127.0.0.1:{t1}"
        new["target"] = [{"name": "t1", "listen": f"127.0.0.1:{t2}"},
                         {"name": "t2", "listen": f"127.0.0.1:{v}"}]
        ev = d.reload(new)
        check(ev["ok"] is True and ev["generation"] == 2, f"{ev}\n{d.stderr()[-1500:]}")
        # VLESS on the first target's old port, to t1 on t2's old port.
        mark = d.mark()
        resp, _ = vless_get(t1, d.uuid, t2, "/generate_204")
        check(resp.status == 204 and resp.headers["x-vlessbench-route"].startswith("vless"), resp)
        e = d.wait_event("http.request", since=mark, path="/generate_204")
        check(e["listener"] == "t1" and e["vless_listener"] == "v", e)
        # A plain request on the VLESS listener's old port reaches target t2.
        r = plain_stream(tcp_connect(v))
        r.send(http_request("GET", "/generate_204", headers={"Connection": "close"}))
        check(r.read_response().status == 204)
        d.wait_event("http.request", since=mark, listener="t2")
        # The connection accepted by the old target t1 keeps being served (and logged by it).
        ds.send(http_request("GET", "/", headers={"X-Vlessbench-Seq": "after-swap"}))
        check(ds.read_response().status == 200)
        d.wait_event("http.request", seq="after-swap")
        direct.close()
        # And back again, in one more reload.
        ev = d.reload(cfg)
        check(ev["ok"] is True and ev["generation"] == 3, ev)
        s = session_line(d, d.mark())
        check(s["policy"]["generation"] == 3 and s["listener"] == "v", s)
        back = d.wait_event("http.request", vless_session=s["session"])
        check(back["listener"] == "t1" and back["vless_listener"] == "v", back)
        check(port_open(t2) and port_open(v) and port_open(t1), "a port closed by the swaps")


@suite.test
def reload_broken_keeps_old_config():
    cfg = base_cfg()
    with Daemon(cfg) as d:
        good = copy.deepcopy(d.cfg)
        ev = d.reload("[log]\nlevel = \"info\"\n[[vless]\nname = \"x\"\n")
        check(ev["ok"] is False and ev["generation"] == 1 and ev.get("error"), ev)
        bad = copy.deepcopy(good)
        bad["vless"][0]["tcp"] = {"nodelay": True, "quickack": "sometimes"}
        ev = d.reload(bad)
        check(ev["ok"] is False and ev["generation"] == 1 and "quickack" in ev["error"], ev)
        # A listener that cannot bind fails the whole reload; the others stay as they were.
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            clash = copy.deepcopy(good)
            clash["vless"][0]["tcp"] = policy(True, "on")
            clash["target"].append({"name": "busy", "listen": f"127.0.0.1:{busy.getsockname()[1]}"})
            ev = d.reload(clash)
            check(ev["ok"] is False and ev["generation"] == 1 and "busy" in ev["error"], ev)
        d.write_config(good)
        check(d.running())
        s = session_line(d, d.mark())
        check(s["policy"]["quickack"] == "kernel" and s["policy"]["generation"] == 1, s)
        check(port_open(d.port("t2")))


@suite.test
def reload_swaps_certificate_and_access_log():
    cfg = base_cfg()
    cert_a, key_a = make_cert(tempdir())
    cert_b, key_b = make_cert(tempdir())
    cfg["tls"] = {"cert": str(cert_a), "key": str(key_a)}

    def peer_cert_pem() -> str:
        with socket.create_connection(("127.0.0.1", d.port("v")), timeout=5) as raw:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with ctx.wrap_socket(raw, server_hostname="localhost") as t:
                return ssl.DER_cert_to_PEM_cert(t.getpeercert(binary_form=True))

    def same(pem: str, path) -> bool:
        return ssl.PEM_cert_to_DER_cert(pem) == ssl.PEM_cert_to_DER_cert(path.read_text())

    with Daemon(cfg) as d:
        check(same(peer_cert_pem(), cert_a), "not serving cert A")
        new = copy.deepcopy(d.cfg)
        new["tls"] = {"cert": str(cert_b), "key": str(key_b)}
        second_log = d.dir / "second.jsonl"
        new["log"]["access"] = str(second_log)
        d.write_config(new)
        d.signal(signal.SIGHUP)
        # The new log is opened before the reload's line is written into it: wait for the line.
        deadline = time.monotonic() + 5
        ev = []
        while not ev and time.monotonic() < deadline:
            time.sleep(0.05)
            ev = [e for e in read_events(second_log) if e["event"] == "config.reload"] if second_log.exists() else []
        check(ev and ev[0]["ok"] is True and ev[0]["generation"] == 2, ev)
        check(same(peer_cert_pem(), cert_b), "still serving cert A after the reload")
        d.access = second_log  # events from now on
        s = session_line(d, 0)
        check(s["policy"]["generation"] == 2, s)


@suite.test
def reload_reopens_rotated_access_log():
    with Daemon(base_cfg()) as d:
        session_line(d, 0)
        rotated = d.access.with_suffix(".1")
        d.access.rename(rotated)
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while not d.access.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        ev = d.wait_event("config.reload")
        check(ev["ok"] is True and ev["generation"] == 2, ev)
        s = session_line(d, 0)
        check(s["policy"]["generation"] == 2, s)
        old = read_events(rotated)
        check(old and all(e["event"] != "config.reload" for e in old), "rotated file still written")


# ---------------------------------------------------------------------------------------------
# SIGTERM

@suite.test
def sigterm_drains_in_flight_requests():
    # The deadline far above the requests' 1 s: the exit time tells "ended with the requests" from
    # "ended at the deadline" with seconds of slack for a loaded or sanitized machine.
    cfg = base_cfg(drain_timeout_ms=6000)
    d = Daemon(cfg)
    results = {}

    def direct():
        with tcp_connect(d.port("t1"), timeout=10) as s:
            st = plain_stream(s)
            st.send(http_request("GET", "/delay/1000"))
            results["direct"] = st.read_response()

    def via_vless():
        results["vless"] = vless_get(d.port("v"), d.uuid, d.port("t1"), "/delay/1000", timeout=10)[0]

    idle = tcp_connect(d.port("t2"))  # an idle keep-alive connection must not hold the drain up
    # Nor an idle VLESS tunnel whose target connection is idle (the target closes it, the relay ends).
    tunnel = TlsClient(d.port("v")).handshake()
    tunnel.send(vless_header(d.uuid, d.port("t1")) + http_request("GET", "/"))
    read_vless_response_header(tunnel.stream)
    check(tunnel.stream.read_response().status == 200)
    threads = [threading.Thread(target=direct), threading.Thread(target=via_vless)]
    for t in threads:
        t.start()
    # In flight: the target has read both requests (the direct one and the relay's upstream one),
    # besides the idle tunnel's upstream connection.
    wait_server_read(d.port("t1"), with_data=3)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    try:
        rc = d.proc.wait(timeout=10)
    finally:
        elapsed = time.monotonic() - t0
        for t in threads:
            t.join(timeout=10)
    check(rc == 0, f"exit code {rc}\n{d.stderr()}")
    # That the drain waited for the requests shows in their answers below (200 and the whole body).
    check(elapsed < 5.0, f"exit {elapsed:.2f}s after SIGTERM (drain deadline 6 s, requests end within 1 s)")
    for k in ("direct", "vless"):
        r = results.get(k)
        check(r is not None and r.status == 200 and r.body == b"delayed 1000 ms\n", (k, r))
        check(r.headers.get("connection") == "close", (k, r.headers))
    idle.settimeout(1)
    check(idle.recv(10) == b"", "idle connection not closed")
    idle.close()
    check(tunnel.stream.at_eof(), "idle tunnel not closed")
    tunnel.close()
    check(not port_open(d.port("v")), "still accepting after exit")
    check(d.events("vless.session"), "no vless.session line for the drained session")


@suite.test
def sigterm_closes_vless_connections_without_a_request_at_once():
    # Nothing sent yet (handshake pending), handshake done but no header, half a header: none has
    # a request in flight, so the drain closes them at its start, like idle target connections,
    # and logs them as drained (they were "tls_handshake_failed" / "no_header" /
    # "truncated_header" after the whole drain_timeout).
    d = Daemon(base_cfg(drain_timeout_ms=5000))
    d.wait_event("vless.reject", reason="tls_handshake_failed")  # the start-up port probe
    mark = d.mark()
    silent = tcp_connect(d.port("v"))
    no_header = TlsClient(d.port("v")).handshake()
    half_header = TlsClient(d.port("v")).handshake()
    half_header.send(vless_header(d.uuid, d.port("t1"))[:10])
    # The daemon has read the handshakes' last bytes and the 10 header bytes (the silent one sent none).
    wait_server_read(d.port("v"), with_data=2, total=3)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    rc = d.proc.wait(timeout=10)
    elapsed = time.monotonic() - t0
    check(rc == 0, f"exit code {rc}\n{d.stderr()}")
    print(f"FIGURE drain_without_requests_exit_s = {elapsed:.2f}", flush=True)
    check(elapsed < 1.5 * EXIT_SLACK,
          f"exit {elapsed:.2f}s after SIGTERM: the drain waited for clients without a request")
    ev = d.events("vless.reject", since=mark)
    # Phases as the server had got along (on a loaded machine it may not have read everything).
    check(len(ev) == 3 and all(e["reason"] == "drain" and e["phase"] in ("tls", "header") for e in ev), ev)
    check(all("detail" not in e for e in ev), ev)
    for c in (no_header, half_header):
        check(c.stream.at_eof(), "a connection without a request was not closed")
        c.close()
    silent.close()


@suite.test
def sigterm_logs_idle_tunnels_as_drain():
    # Idle tunnels to our own target: the target closes its idle keep-alive connections at the
    # drain's start, so the relay sees the destination's EOF first — caused by the drain, and
    # logged so (it was "upstream_eof", as if the target had ended it on its own). One client
    # answers the daemon's close_notify; the other ignores it, which cut the bounded TLS shutdown
    # and turned the reason into "timeout".
    d = Daemon(base_cfg(drain_timeout_ms=5000))
    tunnels, sids = [], []
    for _ in range(2):
        t = TlsClient(d.port("v")).handshake()
        t.send(vless_header(d.uuid, d.port("t1")) + http_request("GET", "/"))
        read_vless_response_header(t.stream)
        r = t.stream.read_response()
        check(r.status == 200, r)
        sids.append(route_session(r.headers["x-vlessbench-route"]))
        tunnels.append(t)
    answering, ignoring = tunnels
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    check(answering.stream.at_eof(), "idle tunnel not closed")
    answering.close_notify()
    answering.close()
    rc = d.proc.wait(timeout=10)
    elapsed = time.monotonic() - t0
    # The one ignoring close_notify holds the exit up by the 1 s shutdown grace, no more.
    print(f"FIGURE drain_idle_tunnels_exit_s = {elapsed:.2f}", flush=True)
    check(rc == 0 and elapsed < 1.5 + EXIT_SLACK, (rc, elapsed))
    check(ignoring.stream.at_eof(), "idle tunnel not closed")
    ignoring.close()
    for sid in sids:
        s = d.wait_event("vless.session", session=sid)
        check(s["close_reason"] == "drain", s)


@suite.test
def sigterm_deadline_cuts_long_requests():
    cfg = base_cfg(drain_timeout_ms=500)
    d = Daemon(cfg)
    out = {}

    def slow():
        try:
            with tcp_connect(d.port("t1"), timeout=10) as s:
                st = plain_stream(s)
                st.send(http_request("GET", "/delay/5000"))
                out["resp"] = st.read_response()
        except Exception as e:  # noqa: BLE001 - the connection is expected to be cut
            out["error"] = e

    def slow_vless():
        try:
            out["vless"] = vless_get(d.port("v"), d.uuid, d.port("t1"), "/delay/5000", timeout=10)
        except Exception as e:  # noqa: BLE001 - cut as well
            out["vless_error"] = e

    threads = [threading.Thread(target=slow), threading.Thread(target=slow_vless)]
    for t in threads:
        t.start()
    wait_server_read(d.port("t1"), with_data=2)  # both requests are in the target's hands
    t0 = time.monotonic()
    d.signal(signal.SIGINT)
    rc = d.proc.wait(timeout=10)
    elapsed = time.monotonic() - t0
    for t in threads:
        t.join(timeout=10)
    check(rc == 0, rc)
    # Cut at the 0.5 s deadline, not after the requests' 5 s: the bound sits between, generous.
    check(elapsed < 4.0, f"exit {elapsed:.2f}s after SIGINT with a 0.5 s drain deadline")
    check("error" in out and "vless_error" in out, out)
    s = d.wait_event("vless.session")
    check(s["close_reason"] == "drain", s)
    check("drain deadline passed" in d.stderr(), d.stderr())


if __name__ == "__main__":
    suite.run()
