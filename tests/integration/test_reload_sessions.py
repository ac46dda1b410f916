#!/usr/bin/env python3
"""A reload has the say from a session's admission steps on (issue 16 item 4,
docs/configuration.md "Checking and reloading"): a session accepted before a reload authorises its
user and checks its destination against the config current at those steps, and the sessions of a
user the reload removes end at the reload.

Runs in a network namespace of its own: the narrowed destination is a non-loopback address of the
namespace (loopback is always allowed, so only such an address can be taken away by a reload).
"""
from __future__ import annotations

import socket
import threading
import time

import harness as h

LAN = "10.88.0.1"
suite = h.Suite("test_reload_sessions")
ALICE = ("alice", h.new_uuid())
BOB = ("bob", h.new_uuid())


def users(entries) -> list[dict]:
    return [{"name": n, "uuid": u} for n, u in entries]


def config(people, allow) -> dict:
    return {
        "users": users(people),
        "vless": [{"name": "v", "listen": f"127.0.0.1:{h.free_port()}"}],
        "target": [{"name": "http", "listen": f"127.0.0.1:{h.free_port()}"}],
        "destinations": {"allow": allow},
    }


class OneShotHttp:
    """A plain HTTP server on the LAN address that is not one of the daemon's targets."""

    def __init__(self):
        self.sock = socket.create_server((LAN, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        deadline = time.monotonic() + 60
        while not self.stop and time.monotonic() < deadline:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            with c:
                c.settimeout(5)
                try:
                    h.plain_stream(c).read_until(b"\r\n\r\n")
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.sock.close()


def request_through(c: h.TlsClient, uuid: str, host: str, port: int) -> h.Response:
    c.send(h.vless_header(uuid, port, host) + h.http_request("GET", "/", headers={"Connection": "close"}))
    h.read_vless_response_header(c.stream)
    return c.stream.read_response()


@suite.test
def narrowed_destinations_apply_at_the_connect_step():
    server = OneShotHttp()
    cfg = config([ALICE], [f"{LAN}/32"])
    try:
        with h.Daemon(cfg) as d:
            vport = d.port("v")
            # Control: allowed before the reload.
            with h.TlsClient(vport) as c:
                c.handshake()
                h.check(request_through(c, ALICE[1], LAN, server.port).status == 200, "control request failed")
            # Accepted (TLS done) under the old list, header sent after a reload that narrows it.
            with h.TlsClient(vport) as c:
                c.handshake()
                mark = d.mark()
                ev = d.reload(d.cfg | {"destinations": {"allow": []}})
                h.check(ev["ok"], f"reload failed: {ev}")
                accepted_before = server.accepted
                c.send(h.vless_header(ALICE[1], server.port, LAN) + h.http_request("GET", "/"))
                h.check(c.stream.at_eof(), "the session was relayed to a destination the reload took away")
                rej = d.wait_event("vless.reject", since=mark, reason="dest_not_allowed")
                h.check(rej["detail"] == f"{LAN}:{server.port}", f"reject detail {rej}")
                h.check(server.accepted == accepted_before, "the daemon connected to the refused destination")
    finally:
        server.close()


@suite.test
def a_removed_user_cannot_start_on_a_connection_accepted_before():
    cfg = config([ALICE, BOB], [])
    with h.Daemon(cfg) as d:
        with h.TlsClient(d.port("v")) as c:
            c.handshake()
            mark = d.mark()
            ev = d.reload(d.cfg | {"users": users([ALICE])})
            h.check(ev["ok"], f"reload failed: {ev}")
            c.send(h.vless_header(BOB[1], d.port("http")) + h.http_request("GET", "/"))
            h.check(c.stream.at_eof(), "bob's session was relayed after the reload removed bob")
            d.wait_event("vless.reject", since=mark, reason="unknown_user")


@suite.test
def sessions_of_a_removed_user_end_at_the_reload():
    cfg = config([ALICE, BOB], [])
    with h.Daemon(cfg) as d:
        tport = d.port("http")
        clients = {}
        for name, uuid in (ALICE, BOB):
            c = h.TlsClient(d.port("v"), timeout=5).handshake()
            c.send(h.vless_header(uuid, tport) + h.http_request("GET", "/"))
            h.read_vless_response_header(c.stream)
            resp = c.stream.read_response()
            h.check(resp.headers["x-vlessbench-route"].endswith(f"user={name}"), f"{name}: {resp.headers}")
            clients[name] = c
        mark = d.mark()
        ev = d.reload(d.cfg | {"users": users([ALICE])})
        h.check(ev["ok"], f"reload failed: {ev}")
        # Ended by the reload, not by a deadline: the close reason says which (the socket's 5 s
        # timeout bounds the wait, no clock is read).
        h.check(clients["bob"].stream.at_eof(), "bob's session survived the reload that removed bob")
        s = d.wait_event("vless.session", since=mark, user="bob")
        h.check(s["close_reason"] == "user_removed", f"bob's session closed as {s['close_reason']}")
        # alice is untouched: her open session still relays.
        clients["alice"].send(h.http_request("GET", "/generate_204"))
        h.check(clients["alice"].stream.read_response().status == 204, "alice's session broke")
        h.check(not d.events("vless.session", since=mark, user="alice"), "alice's session ended")
        for c in clients.values():
            c.close()


if __name__ == "__main__":
    h.require_binary()
    h.run_in_own_netns(addresses=[LAN])
    suite.run()
