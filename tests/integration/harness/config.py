"""The daemon's TOML config written from a dict, and its access log read back."""
from __future__ import annotations

import json
import uuid as uuidlib
from pathlib import Path

# --------------------------------------------------------------------------------------------
# TOML config

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string for our values
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def policy(nodelay: bool = True, quickack: str = "kernel") -> dict:
    return {"nodelay": nodelay, "quickack": quickack}


def toml_text(cfg: dict) -> str:
    """cfg: {"log", "tls", "limits", "destinations", "admin": {...}, "users", "vless", "target": [...]}."""
    out = []
    for table in ("log", "tls", "limits", "destinations", "admin"):
        if table in cfg:
            out.append(f"[{table}]")
            out += [f"{k} = {_toml_value(v)}" for k, v in cfg[table].items()]
            out.append("")
    for arr in ("users", "vless", "target", "banner", "udp_target", "dns"):
        for entry in cfg.get(arr, []):
            out.append(f"[[{arr}]]")
            out += [f"{k} = {_toml_value(v)}" for k, v in entry.items()]
            out.append("")
    return "\n".join(out)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


# --------------------------------------------------------------------------------------------
# Access log

def read_events(path: Path) -> list[dict]:
    """Every complete JSON line in the access log; a line that is not JSON fails the test."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.split(b"\n")[:-1]:  # the last piece is empty or a line still being written
        if not raw:
            continue
        text = raw.decode("utf-8")  # the log promises UTF-8 whatever clients send
        out.append(json.loads(text))
    return out

