"""Admission: who gets the daemon's capacity.

- The daemon's own VLESS listeners are no destination (no session nested through itself).

Every loop is bounded in count and time; everything stays on 127.0.0.1.
"""
from harness import (Daemon, Suite, TlsClient, check, free_port, http_request, new_uuid, require_binary,
                     vless_get, vless_header)

suite = Suite("test_admission")
require_binary()


# --------------------------------------------------------------------------------------------
# Item 9: no relay to self


@suite.test
def relay_to_own_vless_listener_is_refused():
    # Even with every destination allowed, a session must not nest another one through the
    # daemon's own VLESS port (on any local address).
    uid = new_uuid()
    d = Daemon({
        "users": [{"name": "alice", "uuid": uid}],
        "vless": [{"name": "kernel", "listen": f"127.0.0.1:{free_port()}"},
                  {"name": "quick", "listen": f"127.0.0.1:{free_port()}"}],
        "target": [{"name": "http", "listen": f"127.0.0.1:{free_port()}"}],
        "destinations": {"allow": ["0.0.0.0/0", "::/0"]},
    })
    try:
        kp, qp = d.port("kernel"), d.port("quick")
        for dest, port, shown in (("127.0.0.1", kp, f"127.0.0.1:{kp}"), ("127.0.0.1", qp, f"127.0.0.1:{qp}"),
                                  ("127.0.0.2", kp, f"127.0.0.2:{kp}"), ("0.0.0.0", qp, f"0.0.0.0:{qp}"),
                                  ("::ffff:127.0.0.1", kp, f"[::ffff:127.0.0.1]:{kp}"), ("::1", kp, f"[::1]:{kp}")):
            mark = d.mark()
            with TlsClient(kp) as c:
                c.handshake()
                c.send(vless_header(uid, port, dest) + http_request("GET", "/", headers={"Connection": "close"}))
                c.sock.settimeout(5)
                c.stream.read_to_eof()
            e = d.wait_event("vless.reject", since=mark,
                             pred=lambda x: x.get("reason") not in ("tls_handshake_failed",))
            check(e["reason"] == "dest_is_vless_listener" and e["phase"] == "connect", e)
            check(e["dest"] == shown and e["user"] == "alice", e)
        check(not d.events("vless.session"), "a session was relayed to the daemon's own VLESS port")
        resp, _ = vless_get(kp, uid, d.target_port, "/")  # the target stays reachable
        check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
    finally:
        d.stop()


if __name__ == "__main__":
    suite.run()
