"""The real cores no one here wrote (../shared/peers/README.md): where to find them, and a process
wrapper that writes a core's config, checks it with the core's own checker and waits for every
inbound it configured.

Found as bench/cores.py finds them: VLESSBENCH_PEERS (a folder), then ../shared/peers beside the
checkout, then PATH; v2ray 4.34 is Debian's. A test that needs a core which is not there raises harness.Skip naming it.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import harness as h

sys.path.insert(0, str(h.REPO / "bench"))
import cores  # noqa: E402  bench/cores.py: where the cores are and how each runs; bench/run.py uses it too

_folders = cores.folders
find = cores.find


def require(name: str) -> Path:
    p = find(name)
    if p is None:
        where = ", ".join(str(f) for f in _folders()) or "no peers folder"
        raise h.Skip(f"{name} not found (VLESSBENCH_PEERS, {where}, PATH)")
    return p


def links_json(links_text: str, listener_heading: str, family: str) -> dict:
    """The JSON entry of one family ("v2ray / Xray (outbounds):" or "sing-box (outbounds):") in
    `vlessbenchd links` output, in the section whose heading starts with listener_heading."""
    sections = links_text.split("\n## ")
    for sec in sections:
        if not sec.lstrip("# ").startswith(listener_heading):
            continue
        at = sec.find(family)
        h.check(at >= 0, f"no {family!r} entry in section {listener_heading!r}")
        text = sec[at + len(family):].lstrip()
        obj, _ = json.JSONDecoder().raw_decode(text)
        return obj
    raise AssertionError(f"no links section {listener_heading!r} in:\n{links_text}")


class Core:
    """A core with a generated config: checked with the core's own checker (a refusal fails the
    test with its output), started, waited for on every inbound port given."""

    def __init__(self, name: str, config: dict | str, ports: list[int], suffix: str = ".json"):
        self.name = name
        exe = require(name)
        self.dir = h.tempdir(f"vlessbench-{name}-")
        self.config_path = self.dir / f"config{suffix}"
        self.config_path.write_text(config if isinstance(config, str) else json.dumps(config, indent=2))
        checked = subprocess.run(cores.argv(name, exe, self.config_path, check=True), capture_output=True,
                                 text=True, timeout=60, cwd=self.dir)
        h.check(checked.returncode == 0,
                f"{name}'s own checker refused the config ({self.config_path}):\n{checked.stdout}{checked.stderr}")
        self.log_path = self.dir / f"{name}.log"
        self.proc = h.spawn(cores.argv(name, exe, self.config_path), stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
                            cwd=self.dir)
        try:
            h.wait_ports(ports, proc=self.proc, what=name, timeout=20)
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n--- {name} output ---\n{self.output()}") from None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        h.stop_process(self.proc, signal.SIGTERM, 5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def inbound_port() -> int:
    """A free TCP port for a core's inbound, below the ephemeral range: Xray does not bind a port a
    TIME-WAIT connection holds (../shared/peers/README.md)."""
    import random
    import socket
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32768)
        with socket.socket() as s:
            try:
                s.bind((h.LOOPBACK, port))
            except OSError:
                continue
        if not h.port_open(port):
            return port
    raise RuntimeError("no free port in 20000-32767")


def links_block(links_text: str, listener_heading: str, family: str) -> str:
    """The text entry of one family (e.g. "Clash / mihomo (proxies:):") in the section whose
    heading starts with listener_heading: its lines up to the blank line that ends it."""
    for sec in links_text.split("\n## "):
        if not sec.lstrip("# ").startswith(listener_heading):
            continue
        at = sec.find(family)
        h.check(at >= 0, f"no {family!r} entry in section {listener_heading!r}")
        return sec[at + len(family):].lstrip("\n").split("\n\n", 1)[0] + "\n"
    raise AssertionError(f"no links section {listener_heading!r}")


def socks5_udp_associate(port: int, timeout: float = 5.0):
    """A SOCKS5 UDP ASSOCIATE (RFC 1928) on a core's entry: the TCP control connection (keep it
    open: the association ends with it) and the relay's address."""
    import socket
    import struct
    ctl = socket.create_connection((h.LOOPBACK, port), timeout=timeout)
    ctl.sendall(b"\x05\x01\x00")
    h.check(ctl.recv(2) == b"\x05\x00", "SOCKS5 greeting refused")
    ctl.sendall(b"\x05\x03\x00\x01" + bytes(6))
    head = b""
    while len(head) < 10:
        chunk = ctl.recv(10 - len(head))
        h.check(chunk, "SOCKS5 UDP ASSOCIATE: connection closed")
        head += chunk
    h.check(head[:2] == b"\x05\x00" and head[3] == 1, f"UDP ASSOCIATE refused: {head!r}")
    addr = socket.inet_ntoa(head[4:8])
    (rport,) = struct.unpack(">H", head[8:10])
    return ctl, (h.LOOPBACK if addr == "0.0.0.0" else addr, rport)


def socks5_udp_header(port: int, host: str = "127.0.0.1") -> bytes:
    import socket
    import struct
    return b"\x00\x00\x00\x01" + socket.inet_aton(host) + struct.pack(">H", port)
