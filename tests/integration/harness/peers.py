"""The real cores no one here wrote (../shared/peers/README.md): where to find them, and a process
wrapper that writes a core's config, checks it with the core's own checker and waits for every
inbound it configured.

Found as cores.py (bench/run.py's too) finds them: VLESSBENCH_PEERS (a folder), then ../shared/peers beside the
checkout, then PATH; v2ray 4.34 is Debian's. A test that needs a core which is not there raises harness.Skip naming it.
"""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path

from . import cores
from .checks import Skip, check
from .clients import socks5_udp_associate, socks5_udp_header
from .env import CURL, DAEMON, LOOPBACK
from .frames import dns_query, echo_datagram, udp_echo_trailer
from .ports import free_port
from .processes import Started, tempdir

_folders = cores.folders
find = cores.find


def require(name: str) -> Path:
    p = find(name)
    if p is None:
        where = ", ".join(str(f) for f in _folders()) or "no peers folder"
        raise Skip(f"{name} not found (VLESSBENCH_PEERS, {where}, PATH)")
    return p


def with_params(link: str, **params: str) -> str:
    """A share link with query parameters set (replaced when present), its #name kept."""
    base, _, frag = link.partition("#")
    head, _, query = base.partition("?")
    q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    q.update(params)
    return f"{head}?{urllib.parse.urlencode(q, safe='/')}" + (f"#{frag}" if frag else "")


def links_json(links_text: str, listener_heading: str, family: str) -> dict:
    """The JSON entry of one family ("v2ray / Xray (outbounds):" or "sing-box (outbounds):") in
    `vlessbenchd links` output, in the section whose heading starts with listener_heading."""
    sections = links_text.split("\n## ")
    for sec in sections:
        if not sec.lstrip("# ").startswith(listener_heading):
            continue
        at = sec.find(family)
        check(at >= 0, f"no {family!r} entry in section {listener_heading!r}")
        text = sec[at + len(family):].lstrip()
        obj, _ = json.JSONDecoder().raw_decode(text)
        return obj
    raise AssertionError(f"no links section {listener_heading!r} in:\n{links_text}")


class Core(Started):
    """A core with a generated config: checked with the core's own checker (a refusal fails the
    test with its output), started, waited for on every inbound port given."""

    def __init__(self, name: str, config: dict | str, ports: list[int], suffix: str = ".json"):
        self.name = name
        exe = require(name)
        self.dir = tempdir(f"vlessbench-{name}-")
        self.config_path = self.dir / f"config{suffix}"
        self.config_path.write_text(config if isinstance(config, str) else json.dumps(config, indent=2))
        cores.check_config(name, exe, self.config_path)
        self.log_path = self.dir / f"{name}.log"
        self._start(name, cores.argv(name, exe, self.config_path), ports, cwd=self.dir)


def inbound_port() -> int:
    """A free TCP port for a core's inbound, below the ephemeral range: Xray does not bind a port a
    TIME-WAIT connection holds (../shared/peers/README.md)."""
    return free_port(low=True)


def links_block(links_text: str, listener_heading: str, family: str) -> str:
    """The text entry of one family (e.g. "Clash / mihomo (proxies:):") in the section whose
    heading starts with listener_heading: its lines up to the blank line that ends it."""
    for sec in links_text.split("\n## "):
        if not sec.lstrip("# ").startswith(listener_heading):
            continue
        at = sec.find(family)
        check(at >= 0, f"no {family!r} entry in section {listener_heading!r}")
        return sec[at + len(family):].lstrip("\n").split("\n\n", 1)[0] + "\n"
    raise AssertionError(f"no links section {listener_heading!r}")


_links: dict[str, str] = {}


def links_text(daemon) -> str:
    """What `vlessbenchd links` prints for daemon's config (no QR codes), run once per config."""
    key = str(daemon.config_path)
    if key not in _links:
        r = subprocess.run([str(DAEMON), "links", "-c", key, "--no-qr"], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, r.stderr)
        _links[key] = r.stdout
    return _links[key]


def share_links(links_text: str) -> dict[str, str]:
    """Section heading (e.g. "tls-tester-vision") -> its vless:// share link, from links_text."""
    return {sec.lstrip("# ").split(" ", 1)[0]: next(line for line in sec.splitlines() if line.startswith("vless://"))
            for sec in links_text.split("\n## ") if "vless://" in sec}


def core_config(core: str, links_text: str, heading: str, entry: int, socks: int) -> tuple[str, str]:
    """(config text, suffix): the core's local entries (HTTP/mixed on entry, SOCKS5 with UDP on socks)
    -> the outbound `vlessbenchd links` prints in the section `heading` (a Vision section's Xray
    entry is under "Xray (outbounds):")."""
    if core in ("xray", "v2ray"):
        # Vision, REALITY and XHTTP sections print an Xray-only entry, the others one for both.
        section = next((s for s in links_text.split("\n## ") if s.lstrip("# ").startswith(heading)), "")
        family = "v2ray / Xray (outbounds):" if "v2ray / Xray (outbounds):" in section else "Xray (outbounds):"
        out = links_json(links_text, heading, family)
        cfg = {"log": {"loglevel": "warning"},
               "inbounds": [{"listen": LOOPBACK, "port": entry, "protocol": "http", "settings": {}},
                            {"listen": LOOPBACK, "port": socks, "protocol": "socks",
                             "settings": {"auth": "noauth", "udp": True, "ip": LOOPBACK}}],
               "outbounds": [out]}
        return json.dumps(cfg, indent=2), ".json"
    if core == "sing-box":
        out = links_json(links_text, heading, "sing-box (outbounds):")
        cfg = {"log": {"level": "warn"},
               "inbounds": [{"type": "mixed", "listen": LOOPBACK, "listen_port": entry},
                            {"type": "socks", "listen": LOOPBACK, "listen_port": socks}],
               "outbounds": [out]}
        return json.dumps(cfg, indent=2), ".json"
    # mihomo: its YAML entry under proxies:, everything to it.
    entry_yaml = links_block(links_text, heading, "Clash / mihomo (proxies:):")
    text = (f"mixed-port: {entry}\nsocks-port: {socks}\nbind-address: {LOOPBACK}\nallow-lan: false\n"
            f"mode: rule\nlog-level: warning\nipv6: false\ngeodata-mode: false\n"
            f"proxies:\n{entry_yaml}rules:\n  - MATCH,{heading}\n")
    return text, ".yaml"


def route_session(route: str, transport: str, what: str) -> int:
    fields = dict(p.split("=", 1) for p in route.split() if "=" in p)
    check(route.startswith("vless ") and "session" in fields, f"{what}: not a VLESS route: {route!r}")
    got = fields.get("transport", "tls")
    check(got == transport, f"{what}: transport {got}, expected {transport}: {route!r}")
    return int(fields["session"])


def udp_checks(socks: int, echo_port: int, dns_port: int, count: int, transport: str) -> tuple[list[int], list[int]]:
    """count echoes and count DNS queries through the core's SOCKS5 UDP: the sessions they name."""
    ctl, relay = socks5_udp_associate(socks)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    echoes, dns = [], []
    try:
        echo_head = socks5_udp_header(echo_port)
        dns_head = socks5_udp_header(dns_port)
        for i in range(count):
            # Padded: an echo is never longer than its datagram, and the trailer must fit.
            payload = b"c%03d" % i
            u.sendto(echo_head + echo_datagram(payload), relay)
            data = _recv_skipping_head(u, echo_head)
            body, _, route = udp_echo_trailer(data)
            check(body == payload, f"echo {i}: payload changed")
            echoes.append(route_session(route, transport, "UDP echo"))
            u.sendto(dns_head + dns_query(0x4200 + i, f"q{i}.vlessbench.test"), relay)
            answer = _recv_skipping_head(u, dns_head)
            dns.append(route_session(_dns_route(answer), transport, "DNS"))
    finally:
        u.close()
        ctl.close()
    return echoes, dns


def _recv_skipping_head(u, head: bytes) -> bytes:
    data, _ = u.recvfrom(65535)
    check(data[:3] == b"\0\0\0" and len(data) > len(head), data[:16])
    # The source address in the reply is the echo's; its length depends on the type.
    atyp = data[3]
    skip = 4 + (4 if atyp == 1 else 16 if atyp == 4 else 1 + data[4]) + 2
    return data[skip:]


def _dns_route(answer: bytes) -> str:
    marker = b"VLESSBENCH-DNS "
    at = answer.find(marker)
    check(at > 0, f"no route TXT in the DNS answer: {answer!r}")
    n = answer[at - 1]
    text = answer[at:at + n].decode()
    _, _, rest = text.partition(" ")
    return rest.partition(" ")[2]


def ready_through(core: str, entry: int, target_port: int, timeout: float = 10.0) -> None:
    """Waits until a GET through the core's entry is answered, before the counted requests. Without
    it mihomo 1.19 answered the first counted GET with a 502 in 2 runs of 5, with no connection
    reaching the daemon (its log has no session for it: mihomo never dialled). With it, 14 runs of
    14 passed and this GET was answered at the first try each time; retries would be printed."""
    url = f"http://{LOOPBACK}:{target_port}/generate_204"
    deadline = time.monotonic() + timeout
    early = 0
    while True:
        r = subprocess.run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-x",
                            f"http://{LOOPBACK}:{entry}", url], capture_output=True, text=True, timeout=10)
        if r.stdout == "204":
            break
        early += 1
        check(time.monotonic() < deadline, f"{core}: no answer through its entry within {timeout}s ({r.stdout})")
        time.sleep(0.1)
    if early:
        print(f"FIGURE {core}_requests_unanswered_before_ready = {early}", flush=True)
