"""v2ray 4.34 as a client of our VLESS+TLS listener: http inbound -> vless outbound (TLS, allowInsecure)."""
from harness import (V2ray, Daemon, Suite, check, curl, curl_headers, free_port, new_uuid, require_binary,
                     v2ray_client_config)

suite = Suite("test_v2ray_interop")
require_binary()

D = Daemon(limits={"header_timeout_ms": 3000})
VP = D.port("kernel")
TP = D.target_port
PROXY_PORT = free_port()
V = V2ray(v2ray_client_config(PROXY_PORT, VP, D.uuid), PROXY_PORT)
PROXY = f"http://127.0.0.1:{PROXY_PORT}"


def fetch(args, seq: str):
    r = curl(["-i", "-x", PROXY, "-H", f"X-Vlessbench-Seq: {seq}", "-H", "X-Vlessbench-Run: v2ray", *args])
    check(r.returncode == 0, (r.returncode, r.stderr, V.output()[-2000:]))
    # With -p, curl prints the proxy's CONNECT answer first: the last head is the target's.
    heads = r.stdout.split(b"\r\n\r\n")
    target_head = [h for h in heads if b"X-Vlessbench-Route" in h or b"x-vlessbench-route" in h]
    check(target_head, r.stdout[:500])
    return r, curl_headers(target_head[-1])


def check_vless_route(seq: str, dest: str):
    e = D.wait_event("http.request", seq=seq, run="v2ray")
    check(e["route"] == "vless" and e["vless_user"] == D.user, e)
    check(e["vless_client"].startswith("127.0.0.1:"), e)
    s = D.wait_event("vless.session", session=e["vless_session"], timeout=10)
    check(s["user"] == D.user and s["listener"] == "kernel" and s["dest"] == dest, s)
    check(s["client"] == e["vless_client"], (s, e))
    check(s["tls_version"] == "TLSv1.3" and s["sni"] == "localhost", s)
    return e, s


@suite.test
def curl_proxy_forward():
    r, h = fetch([f"http://127.0.0.1:{TP}/"], "fwd")
    check(r.stdout.rstrip().endswith(b"vlessbench target"), r.stdout[-200:])
    check(h["x-vlessbench-route"].startswith("vless session=") and h["x-vlessbench-route"].endswith(f"user={D.user}"),
          h)
    check("vless;dur=" in h.get("server-timing", ""), h)
    e, _ = check_vless_route("fwd", f"127.0.0.1:{TP}")
    check(h["x-vlessbench-route"] == f"vless session={e['vless_session']} user={D.user}", (h, e))


@suite.test
def curl_proxy_connect():
    r, h = fetch(["-p", f"http://127.0.0.1:{TP}/bytes/50000"], "tunnel")
    check(h["x-vlessbench-route"].startswith("vless session="), h)
    e, s = check_vless_route("tunnel", f"127.0.0.1:{TP}")
    check(e["bytes"] == 50000 and s["bytes_down"] >= 50000, (e, s))


@suite.test
def domain_destination():
    _, h = fetch(["-p", f"http://localhost:{TP}/generate_204"], "domain")
    check(h["x-vlessbench-route"].startswith("vless session="), h)
    _, s = check_vless_route("domain", f"localhost:{TP}")
    check(s["phases_us"].get("resolved", -1) >= 0, s)


@suite.test
def wrong_uuid_is_rejected():
    port = free_port()
    mark = D.mark()
    with V2ray(v2ray_client_config(port, VP, new_uuid()), port):
        r = curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", f"http://127.0.0.1:{port}",
                  f"http://127.0.0.1:{TP}/"], timeout=10)
        check(r.stdout != b"200", r.stdout)
        e = D.wait_event("vless.reject", since=mark, reason="unknown_user", timeout=10)
        check(e["listener"] == "kernel" and e["phase"] == "header", e)
    check(not D.events("http.request", since=mark), "a request got through with a wrong UUID")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        V.stop()
        D.stop()
