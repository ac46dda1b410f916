#!/usr/bin/env python3
"""The generated vlessbenchd.service passes `systemd-analyze verify`, and keeps the properties the
deployment relies on (issue 5): Type=notify, a reload that runs --check before SIGHUP, a dedicated
user, CAP_NET_BIND_SERVICE, state and logs directories, hardening that leaves setsockopt alone.
Issue 14: no program outside the package (a minimal Debian has no /bin/kill), and netlink allowed
(getifaddrs needs it, or sessions to the machine's own address are refused). The system test
(tests/system) runs the unit under a real systemd."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.abspath(os.environ.get("VLESSBENCH_BIN", "../../build/bin"))
UNIT = os.environ.get("VLESSBENCH_UNIT", os.path.join(BIN, "../systemd/vlessbenchd.service"))


def main():
    text = open(UNIT).read()
    exec_lines = re.findall(r"^(Exec\w+)=(\S+)(.*)$", text, re.M)
    assert exec_lines, "no Exec lines"
    # verify checks that executables exist: point the unit at this build's binary.
    installed_bin = next(path for key, path, _ in exec_lines if key == "ExecStart")
    local = text.replace(installed_bin, os.path.join(BIN, "vlessbenchd"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vlessbenchd.service")
        open(path, "w").write(local)
        if shutil.which("systemd-analyze") is None:
            print("systemd-analyze is missing (Debian package systemd)", file=sys.stderr)
            return 1
        r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, timeout=60)
        problems = [l for l in (r.stdout + r.stderr).splitlines() if "vlessbenchd.service" in l]
        assert r.returncode == 0 and not problems, f"systemd-analyze verify: rc={r.returncode}\n{r.stdout}{r.stderr}"

    props = dict()
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            props.setdefault(k, []).append(v)
    assert props["Type"] == ["notify"], props["Type"]
    reload = props["ExecReload"]
    assert len(reload) == 1 and " reload --config " in reload[0] and "--pid $MAINPID" in reload[0], reload
    daemon_bin = installed_bin
    for key, path, _ in exec_lines:
        assert path == daemon_bin, f"{key} runs {path}: only {daemon_bin} is sure to be installed"
    config_paths = {args.split("--config ", 1)[1].split()[0] for _, _, args in exec_lines}
    assert len(config_paths) == 1, f"Exec lines disagree on the config: {config_paths}"
    assert "--check" in props["ExecStartPre"][0]
    assert props["DynamicUser"] == ["yes"]
    # The config is 0640 root:vlessbench (packaging/deb/postinst): the dynamic user reads it through
    # this group.
    assert props.get("SupplementaryGroups") == ["vlessbench"], props.get("SupplementaryGroups")
    # CAP_NET_ADMIN: emulate = {...} installs netem qdiscs (server/netem.cpp).
    assert props["AmbientCapabilities"] == ["CAP_NET_BIND_SERVICE CAP_NET_ADMIN"], props["AmbientCapabilities"]
    assert props["CapabilityBoundingSet"] == ["CAP_NET_BIND_SERVICE CAP_NET_ADMIN"], props["CapabilityBoundingSet"]
    assert props["StateDirectory"] == ["vlessbench"] and props["LogsDirectory"] == ["vlessbench"]
    for key in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "RestrictAddressFamilies",
                "SystemCallFilter"):
        assert key in props, key
    # setsockopt is in @system-service and must not be filtered out by a later deny list.
    assert not any("setsockopt" in v for v in props["SystemCallFilter"])
    families = props["RestrictAddressFamilies"][0].split()
    for family in ("AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"):
        assert family in families, (family, families)
    print("unit verified:", UNIT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
