#!/usr/bin/env python3
"""The HTTP target's index page (issue 25 item 3; docs/target.md "The index page"): a browser's
GET / (Accept: text/html) on a [[target]] with index_links = true lists every node (listener name
and ACK policy) with its share link and an SVG QR code, the links dialling the host the browser
used; without that Accept header / answers exactly as before (what the runner and the probe
measure); index_links off shows no UUID; with links on, a Host that names neither the target's
address, localhost, [admin] hosts nor index_host gets 421 and no page (DNS rebinding, on the LAN
address and on loopback), and a hostile Host header injects nothing; a SIGHUP reload
that renames or adds a listener changes the page. Run in a network namespace of its own, so the
same holds on a non-loopback address (a VM's LAN address) with wildcard listeners as the
appliance has them. With chromium and zbarimg: the page at 390 and 1280 CSS px, every QR code as
rendered decodes to its link (VLESSBENCH_INDEX_SHOTS=DIR keeps the screenshots)."""
import html
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
import urllib.parse
from pathlib import Path

from harness import (LOOPBACK, Daemon, Skip, Suite, check, free_port, new_uuid, plain_stream, policy, run_daemon,
                     run_in_own_netns, tcp_connect)

LAN = "10.77.9.1"
run_in_own_netns(addresses=(LAN,))

suite = Suite("test_index_page")
UUID = new_uuid()
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def config(addr: str = LOOPBACK, vless_addr: str | None = None, index_links: bool = True, extra_vless=(),
           names=("default-ack", "quickack"), **target_keys) -> dict:
    vless_addr = vless_addr or addr
    vless = [{"name": names[0], "listen": f"{vless_addr}:{free_port(addr)}", "tcp": policy(True, "kernel"),
              "upstream_tcp": policy(True, "kernel")},
             {"name": names[1], "listen": f"{vless_addr}:{free_port(addr)}", "tcp": policy(True, "on"),
              "upstream_tcp": policy(True, "on")}]
    return {"users": [{"name": "mac", "uuid": UUID}],
            "vless": vless + list(extra_vless),
            "target": [{"name": "http", "listen": f"{addr}:{free_port(addr)}", "index_links": index_links,
                        **target_keys},
                       {"name": "closed", "listen": f"{addr}:{free_port(addr)}"}]}


def request(d: Daemon, target: str = "http", host: str | None = "", accept: str | None = BROWSER_ACCEPT,
            method: str = "GET", version: str = "1.1", path: str = "/"):
    """One request on a fresh connection; host "" means the listener's own HOST:PORT, None no Host."""
    addr, port = d.addr(target)
    lines = [f"{method} {path} HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host or f'{addr}:{port}'}")
    if accept is not None:
        lines.append(f"Accept: {accept}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    with tcp_connect(port, addr) as s:
        s.sendall(raw)
        return plain_stream(s).read_response(head_only=method == "HEAD")


def page_links(body: bytes) -> list[str]:
    """The share links in the page's text areas, unescaped (what a user copies)."""
    return [html.unescape(m) for m in re.findall(r"<textarea[^>]*>([^<]*)</textarea>", body.decode())]


def cli_links(d: Daemon, host: str) -> list[str]:
    r = run_daemon(["links", "--config", d.config_path, "--host", host, "--no-qr"])
    check(r.returncode == 0, r.stderr)
    return re.findall(r"^vless://\S+$", r.stdout, re.M)


def check_page(d: Daemon, host: str, want_names, r=None) -> str:
    """The page lists want_names (and the links `vlessbenchd links --host host` prints, in order),
    one SVG QR code each; returns the body."""
    r = r or request(d)
    check(r.status == 200, r)
    check(r.headers["content-type"] == "text/html; charset=utf-8", r.headers)
    check("default-src 'none'" in r.headers.get("content-security-policy", ""), r.headers)
    check(r.headers.get("vary") == "Accept", r.headers)
    body = r.body.decode()
    links = page_links(r.body)
    check(links == cli_links(d, host), (links, cli_links(d, host)))
    for name in want_names:
        check(f"<h2>{name}</h2>" in body, f"{name} missing")
    check(body.count("<svg ") == len(links), (body.count("<svg "), len(links)))
    check(len(re.findall(r'<path fill="#000" d="(M\d+ \d+h\d+v1h-\d+z)+"/>', body)) == len(links), "QR paths")
    for link in links:
        u = urllib.parse.urlsplit(link)
        check(u.scheme == "vless" and u.username == UUID and u.hostname == host.strip("[]"), link)
    return body


@suite.test
def page_lists_both_policies():
    with Daemon(config()) as d:
        body = check_page(d, LOOPBACK, ["default-ack-mac", "default-ack-mac-vision", "quickack-mac",
                                        "quickack-mac-vision"])
        check("default-ack: tcp quickack=kernel" in body and "quickack: tcp quickack=on" in body, body[:2000])
        check('href="/probe"' in body)
        head = request(d, method="HEAD")
        check(head.status == 200 and head.body == b"", head)
        check(int(head.headers["content-length"]) == len(body.encode()), head.headers)
        ev = d.wait_event("http.request", listener="http", status=200)
        check(ev["path"] == "/", ev)


@suite.test
def plain_get_is_unchanged():
    with Daemon(config()) as d:
        for accept in (None, "*/*", "application/json"):
            r = request(d, accept=accept)
            check(r.status == 200 and r.body == b"vlessbench target\n", r)
            check(r.headers["content-type"] == "text/plain", r.headers)
            check("vary" not in r.headers and "content-security-policy" not in r.headers, r.headers)
        # The probe's samples on / stay samples even from a browser.
        r = request(d, path="/?probe=k3x9&seq=1")
        check(r.body == b"vlessbench target\n" and r.headers.get("access-control-allow-origin") == "*", r)
        addr, port = d.addr("http")
        c = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://{addr}:{port}/"], capture_output=True,
                           timeout=10)
        check(c.returncode == 0 and c.stdout == b"vlessbench target\n", c)


@suite.test
def links_off_shows_no_uuid():
    with Daemon(config()) as d:
        r = request(d, target="closed")
        check(r.status == 200 and r.headers["content-type"].startswith("text/html"), r)
        body = r.body.decode()
        check(UUID not in body and "vless://" not in body and "<svg" not in body, body)
        check("vlessbenchd links" in body and 'href="/probe"' in body and "index_links" in body, body)
    # The whole daemon with index_links off everywhere.
    with Daemon(config(index_links=False)) as d:
        body = request(d).body.decode()
        check(UUID not in body and "vless://" not in body, body)


@suite.test
def hostile_host_headers():
    cfg = config()
    cfg["admin"] = {"listen": f"{LOOPBACK}:{free_port()}", "hosts": ["bench-vm.example", "bench-vm.local"]}
    with Daemon(cfg) as d:
        _, port = d.addr("http")
        hostile = ['"><script>alert(1)</script>', "a\" onmouseover=\"alert(1)", "x'><b>", "<svg/onload=alert(1)>",
                   "evil.example:8080<b>", "[::1", "[::1]x", "host:99999", "a..b", "-" * 300, "a" * 5000,
                   "a.example/../x", "%3Cscript%3E", "\u00e9.example"]  # ("": the helper's own HOST:PORT)
        statuses: dict[int, int] = {}
        for h in hostile:
            r = request(d, host=h)
            # A head too large is refused as such; anything else names no host of this target: 421,
            # and nothing of the page.
            check(r.status in (400, 421, 431), (h[:40], r))
            statuses[r.status] = statuses.get(r.status, 0) + 1
            check(UUID.encode() not in r.body and b"<script" not in r.body and b"<b>" not in r.body, (h[:40], r))
        # Absent (HTTP/1.0 without Host): the address the request came to.
        r = request(d, host=None, version="1.0")
        check(r.status == 200 and all(urllib.parse.urlsplit(x).hostname == LOOPBACK for x in page_links(r.body)), r)
        # The target's own names are used as they are, without their port.
        for h, want in (("Bench-VM.example:8080", "bench-vm.example"), (f"{LOOPBACK}:{port}", LOOPBACK),
                        ("bench-vm.local.", "bench-vm.local"), ("localhost:1", "localhost")):
            links = page_links(request(d, host=h).body)
            check(links and all(urllib.parse.urlsplit(x).hostname == want for x in links), (h, links))
        check(d.proc.poll() is None, "daemon died")
        print(f"hostile Host values: answers {statuses}")


def misdirected(d: Daemon, addr: str, port: int, host: str):
    """GET / with Host on a connection to addr:port: 421 with no UUID, logged as misdirected_host."""
    with tcp_connect(port, addr) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nAccept: {BROWSER_ACCEPT}\r\n\r\n".encode())
        r = plain_stream(s).read_response()
    check(r.status == 421 and UUID.encode() not in r.body and b"vless://" not in r.body, (host, r))


@suite.test
def rebinding_host_is_misdirected():
    """DNS rebinding: a page whose own name resolves to the VM reads nothing, on the LAN address and on
    loopback; the listener's own address literal (any port, ssh -L), localhost and index_host do."""
    cfg = config(addr=LAN, vless_addr="0.0.0.0")
    cfg["target"][0]["listen"] = f"0.0.0.0:{free_port(LAN)}"
    with Daemon(cfg) as d:
        _, port = d.addr("http")
        for addr in (LAN, LOOPBACK):
            for host in ("rebind.attacker.example", f"rebind.attacker.example:{port}", "10.77.9.200",
                         LOOPBACK if addr == LAN else LAN, "vm.example"):
                misdirected(d, addr, port, host)
            for host, want in ((f"{addr}:{port}", addr), (f"{addr}:9999", addr), ("localhost", "localhost")):
                with tcp_connect(port, addr) as s:
                    s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nAccept: {BROWSER_ACCEPT}\r\n\r\n".encode())
                    r = plain_stream(s).read_response()
                check(r.status == 200 and page_links(r.body) == cli_links(d, want), (host, r.status))
        ev = d.wait_event("http.request", listener="http", status=421)
        check(ev.get("error") == "misdirected_host", ev)
        # Links off: the page carries nothing to steal, and any Host gets it.
        r = request(d, target="closed", host="rebind.attacker.example")
        check(r.status == 200 and UUID.encode() not in r.body, r)
    named = config(addr=LAN, index_host="vm.example")
    with Daemon(named) as d:
        _, port = d.addr("http")
        r = request(d, host="vm.example:8080")
        check(r.status == 200 and page_links(r.body) == cli_links(d, "vm.example"), r.status)
        misdirected(d, LAN, port, "rebind.attacker.example")


@suite.test
def index_host_wins():
    with Daemon(config(index_host="Bench.Example")) as d:
        links = page_links(request(d).body)  # whatever host the browser used (its own address here)
        check(links == cli_links(d, "bench.example"), links)
    with Daemon(config(index_host="<x>"), start=False) as d:
        r = run_daemon(["--check", "--config", d.config_path])
        check(r.returncode != 0 and "index_host" in r.stderr, (r.returncode, r.stderr))


@suite.test
def reload_changes_the_page():
    cfg = config()
    with Daemon(cfg) as d:
        check_page(d, LOOPBACK, ["quickack-mac"])
        renamed = dict(cfg)
        vless = [dict(v) for v in cfg["vless"]]
        vless[1]["name"] = "quick-renamed"
        vless.append({"name": "third", "listen": f"{LOOPBACK}:{free_port()}", "tcp": policy(True, "off")})
        renamed["vless"] = vless
        ev = d.reload(renamed)
        check(ev.get("ok"), ev)
        body = check_page(d, LOOPBACK, ["default-ack-mac", "quick-renamed-mac", "third-mac"])
        check("<h2>quickack-mac</h2>" not in body, "old name still shown")
        check("third: tcp quickack=off" in body, body)
        off = dict(renamed)
        off["target"] = [dict(t, index_links=False) for t in renamed["target"]]
        check(d.reload(off).get("ok"))
        body = request(d).body.decode()
        check(UUID not in body and "vless://" not in body, body)


@suite.test
def lan_address_with_wildcard_listeners():
    """As on the appliance: listeners on 0.0.0.0, the browser on the VM's LAN address."""
    cfg = config(addr=LAN, vless_addr="0.0.0.0")
    cfg["target"][0]["listen"] = f"0.0.0.0:{free_port(LAN)}"
    with Daemon(cfg) as d:
        _, port = d.addr("http")
        with tcp_connect(port, LAN) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {LAN}:{port}\r\nAccept: text/html\r\n\r\n".encode())
            r = plain_stream(s).read_response()
        check_page(d, LAN, ["default-ack-mac", "quickack-mac"], r=r)
        # No Host: the address the request came to, not 0.0.0.0.
        with tcp_connect(port, LAN) as s:
            s.sendall(b"GET / HTTP/1.0\r\nAccept: text/html\r\n\r\n")
            r = plain_stream(s).read_response()
        check(page_links(r.body) == cli_links(d, LAN), page_links(r.body))


@suite.test
def appliance_turns_links_on():
    """The image's first boot (packaging/image/vlessbench-firstboot) turns index_links on for the
    shipped config's "http" target, and only there; the package's config leaves it off."""
    root = Path(__file__).resolve().parents[2]
    template = root / "config" / "vlessbenchd.toml"
    shipped = tomllib.loads(template.read_text())
    check(not any(t.get("index_links") for t in shipped["target"]), "the package's config shows links")
    script = (root / "packaging" / "image" / "vlessbench-firstboot").read_text()
    lines = [line for line in script.splitlines() if "index_links" in line and line.startswith("sed -i")]
    check(len(lines) == 1, lines)
    with tempfile.TemporaryDirectory() as tmp:
        config_new = Path(tmp) / "vlessbenchd.toml.new"
        # The install's folders (the unit's StateDirectory, LogsDirectory) as temporary ones.
        text = template.read_text().replace("00000000-0000-4000-8000-000000000000", UUID)
        config_new.write_text(text.replace("/var/lib/vlessbench", tmp).replace("/var/log/vlessbench", tmp))
        subprocess.run(["sh", "-c", lines[0]], env=dict(os.environ, config=str(config_new.with_suffix(""))),
                       check=True, timeout=10)
        made = tomllib.loads(config_new.read_text())
        check([t["name"] for t in made["target"] if t.get("index_links")] == ["http"], made["target"])
        r = run_daemon(["--check", "--config", config_new])
        check(r.returncode == 0, r.stderr)


@suite.test
def browser_renders_scannable_codes():
    """The page in a real browser, phone and desktop widths: nothing wider than the screen, and
    every QR code as drawn decodes (zbarimg) to its link."""
    from devtools import CHROMIUM, Browser
    zbar = shutil.which("zbarimg")
    if not CHROMIUM or not zbar:
        raise Skip("needs chromium and zbarimg (tools/deps.sh --test)")
    shots = os.environ.get("VLESSBENCH_INDEX_SHOTS")
    cfg = config(addr=LAN, vless_addr="0.0.0.0")
    with Daemon(cfg) as d, Browser() as b:
        _, port = d.addr("http")
        want = cli_links(d, LAN)
        for width, height in ((390, 844), (1280, 900)):
            session = b.open_sized(f"http://{LAN}:{port}/", width, height)
            deadline = time.monotonic() + 20
            while b.js(session, "document.querySelectorAll('svg').length") != len(want):
                check(time.monotonic() < deadline, "page did not load")
                time.sleep(0.1)
            overflow = b.js(session, "document.documentElement.scrollWidth")
            check(overflow <= width, f"{width} px: the page is {overflow} px wide")
            png = b.screenshot(session)
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "page.png"
                path.write_bytes(png)
                z = subprocess.run([zbar, "-q", "--raw", str(path)], capture_output=True, text=True, timeout=60)
            decoded = sorted(line for line in z.stdout.splitlines() if line.startswith("vless://"))
            check(decoded == sorted(want), (width, decoded, want))
            if shots:
                Path(shots, f"index-page-{width}.png").write_bytes(png)


suite.run()
