"""The servers no one here wrote, as bench/run.py and the tests run them (issue 26, issue 28):
where a core's binary is (../shared/peers/README.md), how each runs and checks a config, and the
configs that make Xray and sing-box VLESS servers on every transport and HAProxy a bare TLS
terminator in front of the target. Python 3 stdlib only; peers.py (the tests' process wrapper)
finds the cores through this module, so bench and tests look in the same places.

Found through VLESSBENCH_PEERS (a folder), then ../shared/peers beside the checkout (or beside the
main checkout of a git worktree), then PATH; v2ray 4.34 and haproxy are Debian's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .env import REPO

# name -> (argv to run a config, argv to check one); {c} is the config file, {d} its folder.
COMMANDS = {
    "xray": (["run", "-c", "{c}"], ["run", "-test", "-c", "{c}"]),
    "v2ray": (["-config", "{c}"], ["-test", "-config", "{c}"]),
    "sing-box": (["run", "-c", "{c}"], ["check", "-c", "{c}"]),
    "mihomo": (["-d", "{d}", "-f", "{c}"], ["-t", "-d", "{d}", "-f", "{c}"]),
    # -db: foreground, no daemon mode (killed with the bench); -c: check only.
    "haproxy": (["-db", "-f", "{c}"], ["-c", "-q", "-f", "{c}"]),
}

# How each transport is set up on every server the bench runs: the same paths and service name,
# so one share link shape reaches ours, Xray's and sing-box's listener of that transport.
WS_PATH, HU_PATH, GRPC_SERVICE = "/ws", "/hu", "vlessbench"
TRANSPORTS = ("tcp", "ws", "httpupgrade", "grpc")
# Vision (flow xtls-rprx-vision, issue 29) runs on raw TLS only. Xray and sing-box take it on an
# inbound of its own whose user names the flow; ours serves it on the raw-TLS listener, per header.
FLOW = "xtls-rprx-vision"
SERVER_TRANSPORTS = (*TRANSPORTS, "vision")


def folders() -> list[Path]:
    found = []
    if os.environ.get("VLESSBENCH_PEERS"):
        found.append(Path(os.environ["VLESSBENCH_PEERS"]))
    for base in (REPO, *REPO.parents):
        cand = base.parent / "shared" / "peers"
        if cand.is_dir():
            found.append(cand)
            break
    return found


def find(name: str) -> Path | None:
    for folder in folders():
        p = folder / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None


def argv(name: str, exe: Path, config: Path, check: bool = False) -> list[str]:
    run_args, check_args = COMMANDS[name]
    return [str(exe), *[a.format(c=config, d=config.parent) for a in (check_args if check else run_args)]]


def check_config(name: str, exe: Path, config: Path) -> None:
    """The core's own checker on config; a refusal raises RuntimeError with its words."""
    r = subprocess.run(argv(name, exe, config, check=True), capture_output=True, text=True, timeout=60,
                       cwd=config.parent)
    if r.returncode != 0:
        raise RuntimeError(f"{name}'s own checker refused {config}:\n{r.stdout}{r.stderr}")


def link(uuid: str, host: str, port: int, transport: str, name: str, mux: bool = False) -> str:
    """The vless:// link the runner's built-in client dials each server's listener with."""
    kind = {"tcp": "tcp", "vision": f"tcp&flow={FLOW}", "ws": f"ws&path={WS_PATH.replace('/', '%2F')}",
            "httpupgrade": f"httpupgrade&path={HU_PATH.replace('/', '%2F')}",
            "grpc": f"grpc&serviceName={GRPC_SERVICE}"}[transport]
    return (f"vless://{uuid}@{host}:{port}?encryption=none&security=tls&sni=localhost&allowInsecure=1"
            f"&type={kind}{'&mux=on' if mux else ''}#{name}")


def xray_server(uuid: str, cert: Path, key: str | Path, host: str, ports: dict[str, int]) -> dict:
    """Xray as a VLESS server: one inbound per transport in ports (TLS 1.3 only, the bench's
    certificate), freedom outbound. Mux.Cool and UDP (command 2, XUDP) are on by themselves."""
    inbounds = []
    for transport, port in ports.items():
        tls = {"minVersion": "1.3", "certificates": [{"certificateFile": str(cert), "keyFile": str(key)}]}
        raw = transport in ("tcp", "vision")
        stream: dict = {"network": "raw" if raw else transport, "security": "tls", "tlsSettings": tls}
        if transport == "ws":
            stream["wsSettings"] = {"path": WS_PATH}
        elif transport == "httpupgrade":
            stream["httpupgradeSettings"] = {"path": HU_PATH}
        elif transport == "grpc":
            stream["grpcSettings"] = {"serviceName": GRPC_SERVICE}
            tls["alpn"] = ["h2"]
        user = {"id": uuid, **({"flow": FLOW} if transport == "vision" else {})}
        inbounds.append({"tag": f"vless-{transport}", "listen": host, "port": port, "protocol": "vless",
                         "settings": {"clients": [user], "decryption": "none"}, "streamSettings": stream})
    return {"log": {"loglevel": "warning"}, "inbounds": inbounds,
            "outbounds": [{"protocol": "freedom", "settings": {}}]}


def singbox_server(uuid: str, cert: Path, key: Path, host: str, ports: dict[str, int]) -> dict:
    """sing-box as a VLESS server: one inbound per transport in ports (TLS 1.3 only), direct
    outbound. It takes UDP as command 2 and XUDP; it has no Mux.Cool (its multiplex is sing-mux)."""
    inbounds = []
    for transport, port in ports.items():
        tls = {"enabled": True, "certificate_path": str(cert), "key_path": str(key), "min_version": "1.3"}
        user = {"uuid": uuid, **({"flow": FLOW} if transport == "vision" else {})}
        inbound = {"type": "vless", "tag": f"vless-{transport}", "listen": host, "listen_port": port,
                   "users": [user], "tls": tls}
        if transport == "ws":
            inbound["transport"] = {"type": "ws", "path": WS_PATH}
        elif transport == "httpupgrade":
            inbound["transport"] = {"type": "httpupgrade", "path": HU_PATH}
        elif transport == "grpc":
            inbound["transport"] = {"type": "grpc", "service_name": GRPC_SERVICE}
            tls["alpn"] = ["h2"]
        inbounds.append(inbound)
    return {"log": {"level": "warn"}, "inbounds": inbounds, "outbounds": [{"type": "direct"}]}


def client(name: str, uuid: str, host: str, entry_port: int, server_port: int, flow: str = "") -> dict:
    """Xray's or sing-box's own client: a local HTTP entry (CONNECT; sing-box's mixed inbound) and
    a VLESS outbound over raw TLS to server_port (certificate not checked, SNI localhost): the
    cores' clients against every server, as issue 28 asks of the bench. flow: e.g. FLOW (Vision)."""
    if name == "xray":
        return {"log": {"loglevel": "warning"},
                "inbounds": [{"listen": host, "port": entry_port, "protocol": "http", "settings": {}}],
                "outbounds": [{"protocol": "vless",
                               "settings": {"vnext": [{"address": host, "port": server_port,
                                                       "users": [{"id": uuid, "encryption": "none",
                                                                  **({"flow": flow} if flow else {})}]}]},
                               "streamSettings": {"network": "raw", "security": "tls",
                                                  "tlsSettings": {"serverName": "localhost", "allowInsecure": True}}}]}
    if name == "sing-box":
        return {"log": {"level": "warn"},
                "inbounds": [{"type": "mixed", "listen": host, "listen_port": entry_port}],
                "outbounds": [{"type": "vless", "server": host, "server_port": server_port, "uuid": uuid,
                               **({"flow": flow} if flow else {}),
                               "tls": {"enabled": True, "server_name": "localhost", "insecure": True}}]}
    raise ValueError(f"no client config for {name}")


def haproxy_config(pem: Path, host: str, port: int, target_port: int) -> str:
    """HAProxy as the floor: TLS termination in TCP mode in front of the target, one thread, TLS
    1.3 only, pem = the bench's certificate and key in one file; no logging, no health checks."""
    return (
        "global\n"
        "  nbthread 1\n"
        "  maxconn 5000\n"  # 2 fds each: the idle-session phase holds 1,000; within a 20,000-fd limit
        "  ssl-default-bind-options ssl-min-ver TLSv1.3\n"
        "defaults\n"
        "  mode tcp\n"
        "  timeout connect 5s\n"
        "  timeout client 120s\n"
        "  timeout server 120s\n"
        "frontend floor\n"
        f"  bind {host}:{port} ssl crt {pem}\n"
        "  default_backend target\n"
        "backend target\n"
        f"  server target {host}:{target_port}\n")
