#!/usr/bin/env python3
"""What one client may hold (issue 23, items 3 and 9; docs/configuration.md [limits] max_*_per_client,
max_upstreams_per_connection; docs/sessions.md "Client budget"):

- one gRPC connection whose streams each open Mux.Cool sub-connections gets at most
  max_upstreams_per_connection upstreams over all its streams, each one past it refused with
  `client_budget`, and the daemon's descriptors (/proc/PID/fd) grow by that budget only;
- one source address holds at most max_sessions_per_client sessions (`too_many_sessions_from_client`),
  another address is not affected;
- a Mux.Cool sub opened a second after its session began has its own, small upstream phase
  (Server-Timing and vless.sub connect_us), not the time since the session's header;
- sing-mux's destination over UDP is refused by name (`sing_mux_not_tcp`; over TCP it is served);
- refusals reach the human log at info, one line per reason per second with a count.
Runs in a network namespace of its own; every loop is bounded.
"""
import os
import socket
import ssl
import struct
import time

import harness as h
from grpc_wire import DATA, HEADERS, PREFACE, SETTINGS, h2frame, hunk, request_block
from harness import LOOPBACK, check

h.run_in_own_netns()
suite = h.Suite("test_budget")
h.require_binary()

UUID = h.new_uuid()
BUDGET = 20  # max_upstreams_per_connection
PER_CLIENT = 4  # max_sessions_per_client
D = h.Daemon({
    "users": [{"name": "alice", "uuid": UUID}],
    "vless": [{"name": "edge", "listen": f"127.0.0.1:{h.free_port()}"},
              {"name": "h2c", "listen": f"127.0.0.1:{h.free_port()}", "transport": "grpc", "tls": False}],
    "target": [{"name": "http", "listen": f"127.0.0.1:{h.free_port()}"}],
}, limits={"max_upstreams_per_connection": BUDGET, "max_sessions_per_client": PER_CLIENT, "max_mux_subs": 64,
           "handshake_timeout_ms": 3000})
VP, GP, TP = D.port("edge"), D.port("h2c"), D.port("http")
NEW, KEEP, END = 1, 2, 3


def fds() -> int:
    return len(os.listdir(f"/proc/{D.proc.pid}/fd"))


def target(port: int, addr: str = "127.0.0.1") -> bytes:
    return bytes([1]) + struct.pack(">H", port) + b"\x01" + socket.inet_aton(addr)


def mux(sid: int, st: int, data: bytes | None = None, dest: bytes = b"") -> bytes:
    meta = struct.pack(">HBB", sid, st, 1 if data is not None else 0) + dest
    out = struct.pack(">H", len(meta)) + meta
    if data is not None:
        out += struct.pack(">H", len(data)) + data
    return out


def read_frame(c):
    sid, st, opt, _, data = h.read_mux_frame(c.stream)
    return sid, st, opt, data




@suite.test
def one_grpc_connection_holds_its_budget_over_all_its_streams():
    streams, subs_each = PER_CLIENT, 8  # 32 subs asked over the streams, BUDGET allowed
    before = fds()
    mark = D.mark()
    sock = h.tcp_connect(GP, timeout=10)
    with sock:
        out = PREFACE + h2frame(SETTINGS, 0, 0)
        for i in range(streams):
            sid = 1 + 2 * i
            body = h.vless_header(UUID, 0, cmd=3) + b"".join(mux(k, NEW, None, target(TP)) for k in range(1, subs_each + 1))
            out += h2frame(HEADERS, 0x4, sid, request_block()) + h2frame(DATA, 0, sid, hunk(body))
        sock.sendall(out)
        refused = D.wait_event("vless.sub", since=mark, timeout=10,
                               pred=lambda e: len([x for x in D.events("vless.sub", since=mark)
                                                   if x.get("error") == "client_budget"]) >= streams * subs_each - BUDGET)
        # The accepted subs' upstreams are open (the kernel's view of the target's port), so the
        # descriptor count below is taken at its peak, not before the dials completed.
        deadline = time.monotonic() + 10
        while len(h.tcp_connections(TP)) < BUDGET and time.monotonic() < deadline:
            time.sleep(0.02)
        check(len(h.tcp_connections(TP)) >= BUDGET, f"{len(h.tcp_connections(TP))} upstreams open, budget {BUDGET}")
        held = fds() - before
        subs = D.events("vless.sub", since=mark)
        over = [x for x in subs if x.get("error") == "client_budget"]
        check(len(over) == streams * subs_each - BUDGET, f"{len(over)} refused of {streams * subs_each}")
        check("max_upstreams_per_connection" in over[0].get("detail", ""), over[0])
        # The connection, its streams' socketpairs, and BUDGET upstreams with the target's end of each.
        check(held <= 1 + 2 * streams + 2 * BUDGET + 4, f"{held} descriptors held by one connection")
        print(f"one gRPC connection, {streams} streams x {subs_each} subs: {len(over)} refused, +{held} descriptors")
        del refused
    check(D.running(), "daemon alive")


def hold_session(source: str = "127.0.0.1") -> h.TlsClient:
    """A raw TLS VLESS session to the target, kept open after one keep-alive answer."""
    s = socket.create_connection(("127.0.0.1", VP), timeout=5, source_address=(source, 0))
    c = h.TlsClient(VP, sock=s, timeout=5)
    c.handshake()
    c.send(h.vless_header(UUID, TP) + h.http_request("GET", "/"))
    h.read_vless_response_header(c.stream)
    check(c.stream.read_response().status == 200, "answered")
    return c


@suite.test
def one_address_holds_at_most_its_sessions():
    # An address of its own: the other cases' sessions from 127.0.0.1 may still be closing.
    mine = "127.0.0.3"
    mark = D.mark()
    held = [hold_session(mine) for _ in range(PER_CLIENT)]
    try:
        try:
            extra = hold_session(mine)
            extra.close()
            got = "served"
        except (ConnectionError, OSError, AssertionError, ssl.SSLError) as e:
            got = repr(e)
        check(got != "served", "a session past max_sessions_per_client was served")
        e = D.wait_event("vless.reject", since=mark, reason="too_many_sessions_from_client")
        check(e["client"].startswith(mine + ":") and "max_sessions_per_client" in e.get("detail", ""), e)
        other = hold_session("127.0.0.4")  # another address has its own share
        other.close()
    finally:
        for c in held:
            c.close()
    # This address's own lines: other cases' sessions from 127.0.0.1 may close after the mark too.
    # A session's slot goes back before its line is written (server/vless_session.hpp finish()).
    def mine_closed() -> int:
        return sum(1 for e in D.events("vless.session", since=mark) if e["client"].startswith(mine + ":"))
    D.wait_event("vless.session", since=mark, timeout=8, pred=lambda _: mine_closed() >= PER_CLIENT)
    hold_session(mine).close()  # freed with its sessions


@suite.test
def a_late_mux_sub_times_its_own_upstream_phase():
    mark = D.mark()
    with h.TlsClient(VP, timeout=10) as c:
        c.handshake()
        req = h.http_request("GET", "/", headers={"Connection": "close"})
        c.send(h.vless_header(UUID, 0, cmd=3) + mux(1, NEW, req, target(TP)))
        began = time.monotonic()
        h.read_vless_response_header(c.stream)
        while read_frame(c)[1] != END:
            pass
        D.wait_event("vless.sub", since=mark, sub=1)  # evidence the session is under way
        time.sleep(1.2)  # not a wait for anything: the age that tells the two clocks apart
        late = D.mark()
        age_ms = (time.monotonic() - began) * 1000
        c.send(mux(2, NEW, req, target(TP)))
        body = b""
        while True:
            sid, st, _, data = read_frame(c)
            body += data
            if st == END:
                break
    head = body.split(b"\r\n\r\n")[0].decode(errors="replace")
    timing = [l for l in head.split("\r\n") if l.lower().startswith("server-timing:")]
    check(timing, head)
    up = [p for p in timing[0].split(":", 1)[1].split(",") if p.strip().startswith("upstream;dur=")]
    check(up, timing)
    ms = float(up[0].split("=")[1])
    # Timed from the sub's own New, the phase is one loopback connect; timed from the session's
    # start it would be at least the session's age when the New was sent (measured, >= 1.2 s).
    check(ms < age_ms / 2, f"the late sub's upstream phase is {ms} ms; the session was {age_ms:.0f} ms old")
    sub = D.wait_event("vless.sub", since=late, sub=2)
    check(sub["connect_us"] < age_ms * 1000 / 2, (sub, age_ms))
    print(f"late sub: upstream;dur={ms} ms, connect_us={sub['connect_us']}")


@suite.test
def sing_mux_over_udp_is_refused_by_name():
    """sing-mux over a TCP request is served (test_sing_mux.py); over UDP it is refused by name, not as a
    name that does not resolve."""
    mark = D.mark()
    with h.TlsClient(VP, timeout=5) as c:
        c.handshake()
        c.send(h.vless_header(UUID, 444, "sp.mux.sing-box.arpa", cmd=2))
        check(c.stream.read_to_eof() == b"", "refused")
    e = D.wait_event("vless.reject", since=mark, reason="sing_mux_not_tcp")
    check("command 2" in e["detail"], e)


@suite.test
def refusals_reach_the_human_log_once_a_second_with_a_count():
    before = D.stderr().count("unknown_user")
    bad = h.new_uuid()
    mark = D.mark()
    for _ in range(50):
        with h.TlsClient(VP, timeout=5) as c:
            c.handshake()
            c.send(h.vless_header(bad, TP))
            c.stream.read_to_eof()
    D.wait_event("vless.reject", since=mark, timeout=8,
                 pred=lambda _: len(D.events("vless.reject", since=mark, reason="unknown_user")) >= 50)
    text = D.wait_stderr("connection(s) refused: unknown_user", timeout=5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the second's count follows once the second is over
        lines = [l for l in D.stderr().splitlines() if "refused: unknown_user" in l]
        counts = [int(l.split("vless: ")[1].split(" ")[0]) for l in lines]
        if sum(counts) >= 50:
            break
        time.sleep(0.2)
    check(sum(counts) >= 50, f"counted {sum(counts)} of 50 in {lines}")
    check(len(lines) <= 8, f"{len(lines)} info lines for 50 refusals")
    check(D.stderr().count("unknown_user") - before == len(lines), "a line per refusal")
    del text
    print(f"50 unknown-user refusals: {len(lines)} info line(s), counts {counts}")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
