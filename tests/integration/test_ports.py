"""Port 0 (docs/configuration.md "Port 0", issue 27 item 6): listeners written "127.0.0.1:0" of
every kind get a port from the kernel, and the daemon says which: its --ports-file (JSON, written
once all are bound, rewritten after a reload, removed at exit), its human log lines and share
links, the dashboard's /api/state; the destination policy knows the bound [[vless]] port; a
reload keeps a port-0 listener's port while name and address stay, and gives a renamed one a new
port; `vlessbenchd links --ports-file` prints the bound ports. The harness side: free_port keeps
TCP and UDP apart, and Daemon.start() retries a start that lost a free_port port to another
process."""
import copy
import json
import re
import socket
import struct

from harness import (ANY_PORT, LOOPBACK, Daemon, echo_datagram, Suite, TlsClient, check, dns_query, free_port, http_request,
                     new_uuid, plain_stream, port_open, read_vless_response_header, require_binary, run_daemon,
                     tcp_connect, udp_echo_trailer, vless_get, vless_header)

suite = Suite("test_ports")
require_binary()

UUID = new_uuid()


def zero_config() -> dict:
    return {
        "users": [{"name": "alice", "uuid": UUID}],
        "vless": [{"name": "edge", "listen": ANY_PORT}, {"name": "quick", "listen": ANY_PORT,
                                                        "tcp": {"quickack": "on"}}],
        "target": [{"name": "http", "listen": ANY_PORT}],
        "banner": [{"name": "hello", "listen": ANY_PORT}],
        "udp_target": [{"name": "udp", "listen": ANY_PORT}],
        "dns": [{"name": "dns", "listen": ANY_PORT}],
        "admin": {"listen": ANY_PORT},
    }


def ports_file(d: Daemon) -> dict:
    return json.loads(d.ports_path.read_text())


def api_state(d: Daemon) -> dict:
    host, port = d.addr("admin")
    with tcp_connect(port, host) as s:
        s.sendall(http_request("GET", "/api/state", host=host))
        r = plain_stream(s).read_response()
    check(r.status == 200, r)
    return json.loads(r.body)


def udp_ask(port: int, data: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.sendto(data, (LOOPBACK, port))
        return u.recvfrom(65535)[0]


@suite.test
def every_kind_on_port_zero_reports_its_bound_port():
    d = Daemon(zero_config())
    try:
        data = ports_file(d)
        check(data["generation"] == 1, data)
        kinds = {e["name"]: (e["kind"], e["protocols"]) for e in data["listeners"]}
        check(kinds == {"edge": ("vless", "tcp"), "quick": ("vless", "tcp"), "http": ("target", "tcp"),
                        "hello": ("banner", "tcp"), "udp": ("udp_target", "udp"), "dns": ("dns", "tcp+udp")}, kinds)
        ports = {name: d.port(name) for name in ("edge", "quick", "http", "hello", "udp", "dns", "admin")}
        check(all(p > 0 for p in ports.values()), ports)
        tcp_ports = [ports[n] for n in ("edge", "quick", "http", "hello", "dns", "admin")]
        check(len(set(tcp_ports)) == len(tcp_ports), ports)
        # The human log names the bound ports, and so does the share link printed at start.
        text = d.wait_stderr("vlessbenchd ready")
        for name in ("edge", "quick", "http", "hello", "udp", "dns"):  # a UDP target's line names its mode
            check(re.search(rf'listener "{name}" (?:\(\w+\) )?on 127\.0\.0\.1:{ports[name]}\b', text),
                  (name, text[-2000:]))
        check(f"admin listener on 127.0.0.1:{ports['admin']} " in text, text[-2000:])
        check(f"@127.0.0.1:{ports['edge']}?" in text and ":0?" not in text, text[-2000:])
        # Each one serves on it.
        resp, _ = vless_get(ports["edge"], UUID, ports["http"], "/")
        check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
        check(port_open(ports["hello"]), "banner")
        payload, listener, route = udp_echo_trailer(udp_ask(ports["udp"], echo_datagram(b"ping")))
        check((payload, listener, route) == (b"ping", "udp", "direct"), (payload, listener, route))
        answer = udp_ask(ports["dns"], dns_query(7, "a.vlessbench.test"))
        check(answer[:2] == struct.pack(">H", 7), answer[:12])
        with tcp_connect(ports["dns"]) as t:
            q = dns_query(8, "b.vlessbench.test")
            t.sendall(struct.pack(">H", len(q)) + q)
            check(plain_stream(t).read_exact(4)[2:] == struct.pack(">H", 8), "dns over tcp")
        # The dashboard lists the bound endpoints (the UDP echo and the DNS responder too).
        shown = {l["name"]: l["listen"] for l in api_state(d)["listeners"]}
        check(shown == {n: f"127.0.0.1:{ports[n]}" for n in ("edge", "quick", "http", "hello", "udp", "dns")}, shown)
        # The destination policy knows the bound port: a session to the daemon's own VLESS port is
        # refused as one, not relayed as a loopback destination.
        mark = d.mark()
        with TlsClient(ports["edge"]) as c:
            c.handshake()
            c.send(vless_header(UUID, ports["quick"]) + http_request("GET", "/", headers={"Connection": "close"}))
            c.stream.read_to_eof()
        e = d.wait_event("vless.reject", since=mark)
        check(e["reason"] == "dest_is_vless_listener" and e["dest"] == f"127.0.0.1:{ports['quick']}", e)
    finally:
        d.stop()
    check(not d.ports_path.exists(), "the ports file outlived the daemon")


@suite.test
def reload_keeps_the_port_of_a_port_zero_listener():
    d = Daemon(zero_config())
    try:
        before = {name: d.port(name) for name in ("edge", "quick", "http", "udp", "dns", "admin")}
        with TlsClient(before["edge"]) as open_session:  # a connection open across the reloads
            open_session.handshake()
            # Same file but a policy and a zone: everything stays where it is.
            cfg = copy.deepcopy(d.cfg)  # its [log] access too
            cfg["vless"][0]["tcp"] = {"quickack": "on"}
            cfg["dns"][0]["zone"] = "example.test"
            ev = d.reload(cfg)
            check(ev["ok"] and ev["generation"] == 2, ev)
            check({n: d.port(n) for n in before} == before, (d.bound, before))
            check(ports_file(d)["generation"] == 2, ports_file(d))
            text = d.wait_stderr("reload ok: generation 2")
            check(f'vless "edge" on 127.0.0.1:{before["edge"]}: nodelay=true quickack=kernel -> nodelay=true quickack=on'
                  in text, text[-1500:])
            check(f'dns "dns" on 127.0.0.1:{before["dns"]} updated' in text, text[-1500:])
            # A new name on port 0 is a new listener on a new port; the old name's port closes.
            cfg = copy.deepcopy(d.cfg)
            cfg["vless"][1]["name"] = "quick2"
            cfg["vless"].append({"name": "extra", "listen": ANY_PORT})
            ev = d.reload(cfg)
            check(ev["ok"] and ev["generation"] == 3, ev)
            check(d.port("edge") == before["edge"] and d.port("http") == before["http"], d.bound)
            check(d.port("quick2") not in (0, before["quick"]) and d.port("extra") > 0, d.bound)
            check("quick" not in d.bound and not port_open(before["quick"]), d.bound)
            resp, _ = vless_get(d.port("quick2"), UUID, d.port("http"), "/")
            check(resp.status == 200, resp)
            # The open connection still gets its VLESS session on the kept listener.
            open_session.send(vless_header(UUID, d.port("http"))
                              + http_request("GET", "/", headers={"Connection": "close"}))
            read_vless_response_header(open_session.stream)
            check(open_session.stream.read_response().status == 200, "session across the reloads")
    finally:
        d.stop()


@suite.test
def links_needs_the_ports_file_for_a_port_zero_listener():
    d = Daemon(zero_config())
    try:
        bare = run_daemon(["links", "--config", d.config_path, "--no-qr"])
        check(bare.returncode == 1 and 'listener "edge" listens on 127.0.0.1:0' in bare.stderr
              and "--ports-file" in bare.stderr, bare.stderr)
        links = run_daemon(["links", "--config", d.config_path, "--no-qr", "--ports-file", d.ports_path])
        check(links.returncode == 0, links.stderr)
        check(f"{UUID}@127.0.0.1:{d.port('edge')}?" in links.stdout, links.stdout[:600])
        check(f"{UUID}@127.0.0.1:{d.port('quick')}?" in links.stdout, links.stdout[:600])
        check(f"port: {d.port('edge')}" in links.stdout and "port: 0\n" not in links.stdout, links.stdout[:1200])
        # A file of another config names none of these listeners: refused, not printed with port 0.
        other = d.dir / "other.json"
        other.write_text(json.dumps({"generation": 1, "listeners": [], "admin": None}))
        wrong = run_daemon(["links", "--config", d.config_path, "--no-qr", "--ports-file", other])
        check(wrong.returncode == 1 and 'names no port for listener "edge"' in wrong.stderr, wrong.stderr)
    finally:
        d.stop()


@suite.test
def free_port_keeps_tcp_and_udp_apart():
    tcp, udp, both = free_port(), free_port(proto="udp"), free_port(proto="tcp+udp")
    check(len({tcp, udp, both}) == 3, (tcp, udp, both))
    for port, kind in ((udp, socket.SOCK_DGRAM), (both, socket.SOCK_DGRAM), (both, socket.SOCK_STREAM)):
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind((LOOPBACK, port))  # free for the protocol it was given for
    try:
        free_port(proto="sctp")
    except ValueError:
        pass
    else:
        raise AssertionError("free_port accepted proto sctp")


@suite.test
def a_start_that_lost_its_port_is_retried_with_another():
    # Another process takes the port free_port gave before the daemon binds it.
    taken = free_port()
    thief = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    thief.bind((LOOPBACK, taken))
    thief.listen(1)
    try:
        d = Daemon({"target": [{"name": "http", "listen": f"{LOOPBACK}:{taken}"}]})
        try:
            check(d.port("http") != taken, (d.port("http"), taken))
            check("Address already in use" not in d.stderr(), "the daemon that runs is the retried one")
            with tcp_connect(d.port("http")) as s:
                s.sendall(http_request("GET", "/", headers={"Connection": "close"}))
                check(plain_stream(s).read_response().status == 200, "target")
        finally:
            d.stop()
        # A port the test chose itself (not from free_port) is not moved: the start fails, naming it.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
            busy.bind((LOOPBACK, 0))
            busy.listen(1)
            chosen = busy.getsockname()[1]
            fixed = Daemon({"target": [{"name": "http", "listen": f"{LOOPBACK}:{chosen}"}]}, start=False)
            try:
                fixed.start()
            except RuntimeError as e:
                check(f"cannot listen on 127.0.0.1:{chosen}: Address already in use" in str(e), str(e)[-800:])
            else:
                raise AssertionError("a start on a port in use that free_port did not give succeeded")
            finally:
                fixed.stop(expect_rc=None)
    finally:
        thief.close()


suite.run()
