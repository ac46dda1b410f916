#!/usr/bin/env python3
"""`vlessbench clients` (issue 28, docs/runner.md "Real clients"): the seed's comparison with real
cores, automated. From the daemon's `links` output and the cores of ../shared/peers (and Debian's
v2ray), one command writes each core's config, checks it with the core's own checker, starts it,
measures direct + the built-in client + every core interleaved, and stops the cores:

- all four cores in one run: every path ok, every sample routed as its path says, `verify` OK
  against the access log, no core process left after;
- SIGINT to the runner mid-run: no core process left either (they run in their own process group,
  so a terminal's Ctrl-C reaches only the runner, which stops them);
- a --core that is not an executable, an unknown core name: a clear error, non-zero exit;
  a core a user does not have is left out with a line saying so.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.parse
from pathlib import Path

import harness as h
from harness import peers
from harness import LOOPBACK, check

suite = h.Suite("test_clients")
h.require_binary()
RUNNER = h.CLIENT_BIN / "vlessbench"
CORES = ("mihomo", "sing-box", "xray", "v2ray")


def make_daemon() -> h.Daemon:
    port = h.free_port
    return h.Daemon({
        "users": [{"name": "me", "uuid": h.new_uuid()}],
        "vless": [{"name": "tls", "listen": f"{LOOPBACK}:{port()}"}],
        "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
    })


D = make_daemon()


def links_file() -> Path:
    r = subprocess.run([str(h.DAEMON), "links", "-c", str(D.config_path), "--no-qr"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, r.stderr)
    path = D.dir / "links.txt"
    path.write_text(r.stdout)
    return path


def node_names() -> list[str]:
    """The names of the nodes links prints (each link's #fragment)."""
    return [urllib.parse.unquote(line.rsplit("#", 1)[1]) for line in links_file().read_text().splitlines()
            if line.startswith("vless://")]


def core_args(names=CORES) -> list[str]:
    out = []
    for n in names:
        out += ["--core", f"{n}={peers.require(n)}"]
    return out


def leftovers(out: Path) -> list[str]:
    """Processes whose command line names a config under out/cores (the cores this run started)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(out / "cores") in cmd:
            found.append(f"{proc.name}: {cmd}")
    return found


@suite.test
def four_cores_in_one_run_verified():
    args = core_args()
    # --out relative, as its default is: mihomo reads -f relative to its -d, so a relative path
    # once had it start on a config of its own making (no entry to the node, left out).
    cwd = h.tempdir("vlessbench-clients-")
    out = cwd / "run"
    target = f"http://{LOOPBACK}:{D.target_port}/generate_204"
    r = subprocess.run([str(RUNNER), "clients", "--links", str(links_file()), *args, "--out", "run",
                        "--target", target, "--new", "10", "--reuse", "20", "--warmup", "1"],
                       capture_output=True, text=True, timeout=240, cwd=cwd)
    print(r.stdout, r.stderr, flush=True)
    check(r.returncode == 0, f"rc {r.returncode}")
    # links prints the raw-TLS listener twice: plain and with flow xtls-rprx-vision. Every core runs
    # each node, except v2ray 4.34 for the Vision one (no flows: it would run it as plain VLESS).
    nodes = node_names()
    check(len(nodes) == 2 and any(n.endswith("-vision") for n in nodes), nodes)
    expected = {"direct"}
    for node in nodes:
        expected |= {f"{c}-{node}" for c in ("builtin", *CORES) if not (c == "v2ray" and node.endswith("-vision"))}
    summary = json.loads((out / "summary.json").read_text())
    names = set(summary["paths"])
    check(names == expected, (names, expected))
    vision = next(n for n in nodes if n.endswith("-vision"))
    check(f"v2ray has no flow xtls-rprx-vision (node {vision}): left out" in r.stderr, r.stderr)
    for name, p in summary["paths"].items():
        check(p["new"]["failed"] == 0 and p["new"]["n"] == 10 and p["reuse"]["n"] == 20, (name, p))
    listing = json.loads((out / "cores" / "cores.json").read_text())
    check(sorted(c["path"] for c in listing) == sorted(expected - {"direct"} - {f"builtin-{n}" for n in nodes}),
          listing)
    for c in listing:
        check(c["version"] and c["version"] != "?", c)
    print(h.verify_log(RUNNER, D.access, out).rstrip(), flush=True)
    check(not leftovers(out), leftovers(out))


@suite.test
def sigint_mid_run_stops_every_core():
    args = core_args(("xray", "sing-box"))
    out = h.tempdir("vlessbench-clients-") / "run"
    mark = D.mark()
    target = f"http://{LOOPBACK}:{D.target_port}/generate_204"
    p = h.spawn([RUNNER, "clients", "--links", links_file(), *args, "--cores", "xray,sing-box", "--out", out,
                 "--target", target,
                 "--new", "100000", "--pause-ms", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Evidence the run is measuring through the cores: a sample's request (labelled with its path;
        # the readiness probe before the run is not) through the last core started.
        D.wait_event("http.request", since=mark, timeout=60, route="vless", path_label="xray-tls-me-vision")
        # Both cores for each of the two nodes links prints (plain and Vision).
        check(len(leftovers(out)) == 4, leftovers(out))
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    deadline = time.monotonic() + 10
    while leftovers(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not leftovers(out), f"cores still running after the runner's SIGINT: {leftovers(out)}")


@suite.test
def bad_core_arguments_are_refused_with_a_reason():
    links = links_file()
    r = subprocess.run([str(RUNNER), "clients", "--links", str(links), "--core", "xray=/nonexistent/xray"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "/nonexistent/xray: not an executable file" in r.stderr, r.stderr)
    r = subprocess.run([str(RUNNER), "clients", "--links", str(links), "--core", "clash=/bin/true"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "unknown core" in r.stderr, r.stderr)
    # Only cores that are not there: each named, then the error.
    r = subprocess.run([str(RUNNER), "clients", "--links", str(links), "--cores", "mihomo"],
                       capture_output=True, text=True, timeout=30, env={**os.environ, "PATH": "/nonexistent"})
    check(r.returncode != 0 and "mihomo not found" in r.stderr and "no core found" in r.stderr, r.stderr)


@suite.test
def a_core_that_carries_nothing_is_left_out():
    # Its entry opens, but nothing behind the node listens: no request is ever carried, so the
    # bounded readiness wait (10 s) leaves it out with the last reason instead of sampling it.
    dead = h.free_port()
    link = (f"vless://{h.new_uuid()}@127.0.0.1:{dead}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#dead")
    out = h.tempdir("vlessbench-clients-")
    r = subprocess.run([str(RUNNER), "clients", "--link", link, *core_args(["v2ray"]), "--no-builtin", "--out",
                        str(out), "--target", f"http://127.0.0.1:{D.target_port}/generate_204", "--new", "1",
                        "--reuse", "1", "--warmup", "0"], capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "v2ray: no request carried through its entry within 10 s" in r.stderr
          and "left out" in r.stderr and "no core could be started" in r.stderr, r.stderr)
    check(not (out / "samples.csv").exists(), "a sample was taken through a core that carried nothing")
    check(not leftovers(out), leftovers(out))


if __name__ == "__main__":
    suite.run()
