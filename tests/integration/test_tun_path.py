"""The runner's `tun` path kind (issue 15): a plain socket that the operating system, not the
application, hands to a proxy client, as a client in TUN mode gets it, must arrive through VLESS.

What captures the socket here is the kernel: in a network namespace of the test's own, an nftables
rule redirects the runner's connections to one address (10.77.0.2) into the real v2ray 4.34
client's dokodemo-door with followRedirect (the "redir" data path of Clash and v2ray, which takes
the socket exactly where a TUN stack takes it: after the application dialled the target), and
v2ray carries them over VLESS to the daemon. The rule matches only the runner's user (it runs as
nobody), so the daemon's own upstream connection to 10.77.0.2 is not captured again.

- `captured=tun://10.77.0.2:P`: every sample's route is vless, no mismatch;
- `leak=tun://10.77.0.1:P`: no rule for that address, so it arrives direct: for a tun path that
  is the mismatch (the reverse of direct), counted in summary.json and by `verify`;
- the direct baseline to 10.77.0.1 stays direct.
"""
import csv
import json
import os
import shutil
import subprocess

from harness import (ANY_PORT, CLIENT_BIN, BIN, LOOPBACK, Daemon, Suite, V2ray, check, free_port, new_uuid, require_binary, run_in_own_netns,
                     tempdir, v2ray_client_config)

TARGET_ADDR, CAPTURED_ADDR = "10.77.0.1", "10.77.0.2"
NOBODY = 65534
run_in_own_netns(addresses=(TARGET_ADDR, CAPTURED_ADDR))
suite = Suite("test_tun_path")
require_binary()
NFT = shutil.which("nft")


def nft(script: str) -> None:
    r = subprocess.run([NFT, "-f", "-"], input=script, capture_output=True, text=True, timeout=10)
    check(r.returncode == 0, f"nft: {r.stderr}")


@suite.test
def tun_path_must_arrive_through_vless():
    if not NFT:
        raise AssertionError("nft not found: tools/deps.sh --test installs nftables")
    tport = free_port()
    cfg = {"users": [{"name": "phone", "uuid": new_uuid()}],
           "vless": [{"name": "v", "listen": ANY_PORT}],
           "target": [{"name": "t", "listen": f"0.0.0.0:{tport}"}]}
    with Daemon(cfg) as d:
        door = free_port()
        v2 = v2ray_client_config(free_port(), d.port("v"), d.uuid)
        v2["inbounds"] = [{"listen": LOOPBACK, "port": door, "protocol": "dokodemo-door",
                           "settings": {"network": "tcp", "followRedirect": True}}]
        nft(f"""table ip vlessbench_tun {{
  chain out {{
    type nat hook output priority -100; policy accept;
    ip daddr {CAPTURED_ADDR} tcp dport {tport} meta skuid {NOBODY} redirect to :{door}
  }}
}}""")
        # The runner runs as nobody (the rule's match): its binary and output directory must be
        # reachable for that user.
        work = tempdir("vlessbench-tun-")
        os.chmod(work, 0o777)
        runner = work / "vlessbench"
        shutil.copy2(CLIENT_BIN / "vlessbench", runner)
        out = work / "run"
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", str(runner), "run",
                "--target", f"http://{TARGET_ADDR}:{tport}/", "--new", "4", "--reuse", "6", "--warmup", "1",
                "--seed", "3", "--out", str(out),
                "--path", f"captured=tun://{CAPTURED_ADDR}:{tport}", "--path", f"leak=tun://{TARGET_ADDR}:{tport}"]
        with V2ray(v2, door):
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        # The leaking tun path makes the run fail, by design.
        check(r.returncode == 1, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        with open(out / "samples.csv", newline="") as f:
            samples = list(csv.DictReader(f))
        check(len(samples) == 3 * 10 and all(s["ok"] == "1" for s in samples),
              [s for s in samples if s["ok"] != "1"][:3])
        routes = {(s["path"], s["route"]) for s in samples}
        check(routes == {("direct", "direct"), ("captured", "vless"), ("leak", "direct")}, routes)
        summary = json.loads((out / "summary.json").read_text())
        paths = summary["paths"]
        check(paths["captured"]["route_mismatches"] == 0, paths["captured"])
        check(paths["leak"]["route_mismatches"] == 10, paths["leak"])
        check(paths["direct"]["route_mismatches"] == 0, paths["direct"])
        check("ROUTE MISMATCH x10 (tun path answered directly" in r.stdout, r.stdout)
        # The daemon's log agrees: each captured sample has a VLESS session, the leak none.
        v = subprocess.run([str(runner), "verify", str(out), "--log", str(d.access)], capture_output=True,
                           text=True, timeout=60)
        check(v.returncode == 1 and "route mismatches (log route vs path kind): 10" in v.stdout,
              f"verify rc {v.returncode}\n{v.stdout}\n{v.stderr}")
        # One session per new-connection sample, one for the reused tunnel, one for the warm-up,
        # each to the address the application dialled (v2ray read it from the redirected socket).
        sessions = d.events("vless.session")
        check(len(sessions) == 4 + 1 + 1, f"{len(sessions)} VLESS sessions for 4 new + 1 reused + 1 warm-up")
        check(all(s["dest"] == f"{CAPTURED_ADDR}:{tport}" for s in sessions), sessions[0])


if __name__ == "__main__":
    suite.run()
