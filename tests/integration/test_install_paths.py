#!/usr/bin/env python3
"""Install paths agree whatever the configure history (issue 14 defect 1): a tree configured
first with the default prefix, then again with docs/deploy.md's -DCMAKE_INSTALL_PREFIX=/usr
-DCMAKE_INSTALL_SYSCONFDIR=/etc, generates a unit whose every --config names the file the install
writes (it kept /usr/local/etc/... from the first configure). Configure only: nothing is built."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def configure(build: Path, *args: str) -> None:
    r = subprocess.run(["cmake", "-S", REPO, "-B", build, "-G", "Ninja", "-DVLESSBENCH_TESTS=OFF", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"configure {args}: {r.stdout}{r.stderr}"


def unit_configs(build: Path) -> set:
    text = (build / "systemd/vlessbenchd.service").read_text()
    return set(re.findall(r"--config (\S+)", text))


def installed_config(build: Path) -> str:
    # The install rule writes the config to "$ENV{DESTDIR}<path>" (CMakeLists.txt install(CODE)).
    text = (build / "cmake_install.cmake").read_text()
    m = re.findall(r'set\(dest "\$ENV\{DESTDIR\}(\S+?)"\)', text)
    assert len(m) == 1, f"config install rule not found: {m}"
    return m[0]


def main() -> int:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        print("cmake and ninja are needed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="vlessbench-paths-") as tmp:
        build = Path(tmp) / "build"
        configure(build)
        first = unit_configs(build)
        assert first == {"/usr/local/etc/vlessbench/vlessbenchd.toml"} == {installed_config(build)}, first
        configure(build, "-DCMAKE_INSTALL_PREFIX=/usr", "-DCMAKE_INSTALL_SYSCONFDIR=/etc")
        second = unit_configs(build)
        assert second == {"/etc/vlessbench/vlessbenchd.toml"}, f"unit after reconfigure: {second}"
        assert installed_config(build) == "/etc/vlessbench/vlessbenchd.toml", installed_config(build)
        assert "ExecStart=/usr/bin/vlessbenchd " in (build / "systemd/vlessbenchd.service").read_text()
        # A package build writes no config at install time (the postinst makes it, on the VM).
        configure(build, "-DVLESSBENCH_INSTALL_CONFIG=OFF")
        text = (build / "cmake_install.cmake").read_text()
        assert "set(dest" not in text, "VLESSBENCH_INSTALL_CONFIG=OFF still writes a config"
    print("install paths: unit and config agree after a reconfigure (/usr/local/etc -> /etc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
