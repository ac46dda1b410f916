"""Namespaces of a test's own: a network namespace for the whole script, a mount namespace with
its own /etc/hosts for one program. Root and unshare, else the test skips."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .checks import Skip, skip_file
from .processes import tempdir

NETNS_ENV = "VLESSBENCH_TEST_NETNS"


def run_in_own_netns(addresses=(), port_range: tuple[int, int] | None = None, timeout: float = 280) -> None:
    """Re-runs the calling test script in a fresh network namespace (unshare --net), unless it runs
    in one already; there, brings lo up, puts each of addresses (non-loopback, the namespace's
    own, as a VM's LAN address is) on lo and, if given, narrows the ephemeral port range. The
    outer process exits with the inner one's status (77, ctest's skip, without root)."""
    if os.environ.get(NETNS_ENV):
        cmds = [["ip", "link", "set", "lo", "up"]] + [["ip", "addr", "add", f"{a}/32", "dev", "lo"] for a in addresses]
        for cmd in cmds:
            subprocess.run(cmd, check=True, timeout=10)
        if port_range:
            Path("/proc/sys/net/ipv4/ip_local_port_range").write_text(f"{port_range[0]} {port_range[1]}\n")
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        skip_file("a network namespace of the test's own needs root and unshare")
    env = dict(os.environ, **{NETNS_ENV: "1"})
    try:
        rc = subprocess.run(["unshare", "--net", "--", sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]],
                            env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"FAIL: the run in its network namespace did not finish within {timeout} s", flush=True)
        rc = 1
    sys.exit(rc)


def private_hosts_prefix(hosts_text: str) -> list:
    """An argv prefix that runs a program in a mount namespace of its own (unshare --mount,
    propagation private) with hosts_text bind-mounted over /etc/hosts, then execs it (same pid).
    The name lookups of that program see these names whatever the machine's /etc/hosts holds.
    Needs root and unshare: raises Skip otherwise."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("mount"):
        raise Skip("a mount namespace of the test's own needs root, unshare and mount")
    path = tempdir("vlessbench-hosts-") / "hosts"
    path.write_text(hosts_text)
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', path]

