#!/usr/bin/env python3
"""`vlessbenchd links` (issue 5): every user x VLESS listener gets a share link, a Clash entry, a
sing-box outbound and a v2ray outbound; the printed v2ray outbound, pasted into a real v2ray 4.34
behind an http inbound, reaches the target through VLESS; the share link works in the runner's
built-in client; a wildcard listener without --host is a clear error; a config with every transport
and option prints what golden/links_every_transport.txt holds, byte for byte (issue 24: one transport
spec, nothing a user sees changed)."""
import json
import re
import subprocess
import sys
from pathlib import Path

from harness import LOOPBACK, Daemon, V2ray, free_port, new_uuid, policy, run_daemon


def blocks(text: str, title: str) -> list[str]:
    """The JSON objects printed after each `title` line."""
    out = []
    for m in re.finditer(re.escape(title) + r"\n(\{.*?\n\})\n", text, re.S):
        out.append(m.group(1))
    return out


def main() -> int:
    users = [{"name": "mac", "uuid": new_uuid()}, {"name": "phone", "uuid": new_uuid()}]
    cfg = {
        "users": users,
        "vless": [{"name": "default-ack", "listen": f"{LOOPBACK}:{free_port()}", "tcp": policy(True, "kernel")},
                  {"name": "quickack", "listen": f"{LOOPBACK}:{free_port()}", "tcp": policy(True, "on")}],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{free_port()}"}],
    }
    with Daemon(cfg) as d:
        r = run_daemon(["links", "--config", d.config_path, "--host", LOOPBACK, "--no-qr"])
        assert r.returncode == 0, r.stderr
        text = r.stdout
        links = re.findall(r"^vless://\S+$", text, re.M)
        # 2 users x 2 raw-TLS listeners, each also with its Vision entries (NAME-vision).
        assert len(links) == 8, links
        assert sum("flow=xtls-rprx-vision" in link for link in links) == 4, links
        assert text.count("type: vless") == 8 and text.count("skip-cert-verify: true") == 8
        assert text.count("flow: xtls-rprx-vision") == 4
        sing = [json.loads(b) for b in blocks(text, "sing-box (outbounds):")]
        v2 = [json.loads(b) for b in blocks(text, "v2ray / Xray (outbounds):")]
        xray = [json.loads(b) for b in blocks(text, "Xray (outbounds):")]  # with the v2ray / Xray ones
        assert len(sing) == 8 and len(v2) == 4, (len(sing), len(v2))
        assert sum(s.get("flow") == "xtls-rprx-vision" for s in sing) == 4, sing
        assert all(x["settings"]["vnext"][0]["users"][0]["flow"] == "xtls-rprx-vision" for x in xray if
                   x["tag"].endswith("-vision")) and sum(x["tag"].endswith("-vision") for x in xray) == 4, xray
        assert {s["server_port"] for s in sing} == {d.port("default-ack"), d.port("quickack")}
        assert all(s["tls"]["enabled"] and s["tls"]["insecure"] for s in sing)

        # QR codes are on by default.
        rq = run_daemon(["links", "--config", d.config_path, "--host", LOOPBACK])
        assert rq.returncode == 0 and "\u2588" in rq.stdout

        # The v2ray outbound for user "phone" on the quickack listener, pasted as printed.
        outbound = next(o for o in v2 if o["tag"] == "quickack-phone")
        http_port = free_port()
        client = {"log": {"loglevel": "warning"},
                  "inbounds": [{"listen": LOOPBACK, "port": http_port, "protocol": "http", "settings": {}}],
                  "outbounds": [outbound]}
        with V2ray(client, http_port):
            res = subprocess.run(["curl", "-sS", "-i", "--max-time", "10", "-x", f"http://{LOOPBACK}:{http_port}",
                                  f"http://{LOOPBACK}:{d.target_port}/generate_204"],
                                 capture_output=True, text=True, timeout=20)
            assert res.returncode == 0, res.stderr
            assert "204 No Content" in res.stdout, res.stdout
            m = re.search(r"X-Vlessbench-Route: vless session=(\d+) user=phone", res.stdout)
            assert m, res.stdout
            ev = d.wait_event("http.request", route="vless", vless_user="phone")
            assert ev["vless_listener"] == "quickack", ev

    # Wildcard listener: links needs --host, and says so.
    wild = {"users": users[:1], "vless": [{"name": "v", "listen": f"0.0.0.0:{free_port()}"}],
            "target": [{"name": "t", "listen": f"{LOOPBACK}:{free_port()}"}]}
    with Daemon(wild, start=False) as d:
        r = run_daemon(["links", "--config", d.config_path])
        assert r.returncode != 0 and "--host" in r.stderr, (r.returncode, r.stderr)
    # Every transport and option (ws with host, early data and its header; plain ws with a
    # percent-encoded path; httpupgrade over TLS and plain; grpc default and named, h2c): the
    # output as it was before the transport spec was one value (core/wire/transport_spec.hpp).
    golden = Path(__file__).resolve().parent / "golden"
    r = run_daemon(["links", "--config", golden / "links_every_transport.toml", "--host", LOOPBACK, "--no-qr"])
    assert r.returncode == 0, r.stderr
    expected = (golden / "links_every_transport.txt").read_text()
    assert r.stdout == expected, "links output changed:\n" + "\n".join(
        f"-{a}\n+{b}" for a, b in zip(expected.splitlines(), r.stdout.splitlines()) if a != b)
    assert r.stdout.count("vless://") == 18 and "early-data-header-name: \"X-Early\"" in r.stdout
    print("links: 8 entries per format (4 of them Vision); printed v2ray outbound reached the target via VLESS as user phone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
