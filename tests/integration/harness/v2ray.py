"""v2ray 4.34 (Debian's) as a process with a generated config, and the config pieces the tests
and bench/run.py build its clients and servers from."""
from __future__ import annotations

import json
from pathlib import Path

from .env import LOOPBACK, V2RAY
from .processes import Started, tempdir

def v2ray_tcp_inbounds(config: dict) -> list[tuple[str, int]]:
    """(host, port) of every inbound of a v2ray config that listens on TCP: all but a
    dokodemo-door whose network leaves tcp out (a UDP-only one cannot be connected to)."""
    out = []
    for ib in config.get("inbounds", []):
        network = (ib.get("settings") or {}).get("network", "tcp") if ib.get("protocol") == "dokodemo-door" else "tcp"
        if "tcp" in str(network).split(","):
            out.append((ib.get("listen", LOOPBACK), int(ib["port"])))
    return out


class V2ray(Started):
    """v2ray 4.34 with a generated JSON config; waits until every TCP inbound it configured accepts
    (port: the one the test uses first, kept as self.port)."""

    def __init__(self, config: dict, port: int | None = None):
        self.dir = tempdir("vlessbench-v2ray-")
        self.config_path = self.dir / "config.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.log_path = self.dir / "v2ray.log"
        inbounds = v2ray_tcp_inbounds(config)
        self.port = port if port is not None else (inbounds[0][1] if inbounds else None)
        self._start("v2ray", [V2RAY, "-config", self.config_path], inbounds, cwd=self.dir)



def v2ray_http_inbound(port: int) -> dict:
    """A v2ray HTTP proxy inbound (CONNECT and plain requests) on loopback."""
    return {"listen": LOOPBACK, "port": port, "protocol": "http", "settings": {}}


def v2ray_client_config(http_port: int, server_port: int, user_uuid: str) -> dict:
    """http inbound -> vless outbound (TLS, allowInsecure, serverName localhost)."""
    return {
        "log": {"loglevel": "warning"},
        "inbounds": [v2ray_http_inbound(http_port)],
        "outbounds": [v2ray_vless_outbound(server_port, user_uuid)],
    }


def v2ray_server_config(port: int, user_uuid: str, cert: Path, key: Path) -> dict:
    """vless inbound over TLS -> freedom."""
    return {
        "log": {"loglevel": "warning"},
        "inbounds": [{
            "listen": LOOPBACK, "port": port, "protocol": "vless",
            "settings": {"clients": [{"id": user_uuid}], "decryption": "none"},
            "streamSettings": {"network": "tcp", "security": "tls",
                               "tlsSettings": {"certificates": [{"certificateFile": str(cert),
                                                                 "keyFile": str(key)}]}},
        }],
        "outbounds": [{"protocol": "freedom", "settings": {}}],
    }



def v2ray_socks_inbound(port: int, udp: bool = True, tag: str | None = None) -> dict:
    """A v2ray SOCKS5 inbound on loopback; udp: UDP ASSOCIATE on, its relay on the same port number
    (so allocate it with free_port(proto="tcp+udp"))."""
    inbound = {"listen": LOOPBACK, "port": port, "protocol": "socks",
               "settings": {"auth": "noauth", "udp": udp, **({"ip": LOOPBACK} if udp else {})}}
    if tag:
        inbound = {"tag": tag, **inbound}
    return inbound


def v2ray_vless_outbound(server_port: int, user_uuid: str, mux_concurrency: int | None = None,
                         tag: str | None = None, ws_path: str | None = None) -> dict:
    """A v2ray VLESS+TLS outbound to the daemon on loopback (allowInsecure, serverName localhost);
    mux_concurrency: Mux.Cool on with that many sub-connections at once; ws_path: over WebSocket
    on that path (v2ray 4.34 sends no early data)."""
    stream = {"network": "ws" if ws_path else "tcp", "security": "tls",
              "tlsSettings": {"serverName": "localhost", "allowInsecure": True}}
    if ws_path:
        stream["wsSettings"] = {"path": ws_path}
    outbound = {
        "protocol": "vless",
        "settings": {"vnext": [{"address": LOOPBACK, "port": server_port,
                                "users": [{"id": user_uuid, "encryption": "none"}]}]},
        "streamSettings": stream,
    }
    if mux_concurrency:
        outbound["mux"] = {"enabled": True, "concurrency": mux_concurrency}
    if tag:
        outbound = {"tag": tag, **outbound}
    return outbound


def v2ray_socks_config(socks_port: int, server_port: int, user_uuid: str, udp: bool = True,
                       mux_concurrency: int | None = None) -> dict:
    """v2ray 4.34: a SOCKS5 inbound (v2ray_socks_inbound) -> a VLESS+TLS outbound to the daemon."""
    return {"log": {"loglevel": "warning"}, "inbounds": [v2ray_socks_inbound(socks_port, udp)],
            "outbounds": [v2ray_vless_outbound(server_port, user_uuid, mux_concurrency)]}


