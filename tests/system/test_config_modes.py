#!/usr/bin/env python3
"""The installed config holds the user UUID (and, on the appliance image, the admin token): it is
never world-readable (issue 38 items 15, 16). The package's postinst (a first install, an upgrade
over the 0644 file older versions made, an admin's own mode) and the image's first-boot script run
in a chroot on an overlay of this machine's root, in a private mount namespace, so nothing outside
it changes (the group they add, the files they write); what needs a running systemd is stubbed.
Checked: mode 0640, owner root, group vlessbench (the unit's SupplementaryGroups=), the admin
token inside and /root/admin-token 0600; and the daemon reads the file as an unprivileged user in
that group (--check) while the same user without it cannot. Root only; skipped (77) without
unshare or overlayfs."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BIN = Path(os.environ.get("VLESSBENCH_BIN", REPO / "build/bin")).resolve()
SKIP = 77

# Runs inside `unshare -m`: $1 a scratch folder, $2 the sources, $3 the daemon binary.
OUTSIDE = r"""
set -eu
T=$1; REPO=$2; DAEMON=$3
mount --make-rprivate /
mount -t tmpfs vlessbench-modes "$T"
mkdir "$T/u" "$T/w" "$T/r"
mount -t overlay overlay -o "lowerdir=/,upperdir=$T/u,workdir=$T/w" "$T/r" || exit 77
R=$T/r
mount -t proc proc "$R/proc"
for d in null urandom; do rm -f "$R/dev/$d"; touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/usr/share/vlessbench" "$R/opt/vb/stubs" "$R/root"
cp "$REPO/config/vlessbenchd.toml" "$R/usr/share/vlessbench/"
cp "$REPO/packaging/deb/postinst" "$REPO/packaging/image/vlessbench-firstboot" "$R/opt/vb/"
cp "$DAEMON" "$R/opt/vb/vlessbenchd"
for s in deb-systemd-helper deb-systemd-invoke systemctl ssh-keygen chpasswd; do
  printf '#!/bin/sh\nexit 0\n' > "$R/opt/vb/stubs/$s"; chmod +x "$R/opt/vb/stubs/$s"
done
rm -rf "$R/etc/vlessbench"
exec chroot "$R" env PATH=/opt/vb/stubs:/usr/sbin:/usr/bin:/sbin:/bin sh -eu -c "$INSIDE"
"""

INSIDE = r"""
c=/etc/vlessbench/vlessbenchd.toml
# The state folder the unit's StateDirectory= makes, owned by its (here: this) user.
mkdir -p /var/lib/vlessbench && chown 65534:65534 /var/lib/vlessbench
modes() { echo "$1 $(stat -c '%a %U %G' "$c")"; }
# The daemon as nobody: with the group, and with no group at all.
# --check also asks whether the access log's folder is writable by the user: the unit's
# LogsDirectory gives the service user that folder, so the test gives it to nobody likewise.
reads() {
  gid=$(getent group vlessbench | cut -d: -f3)
  mkdir -p /var/log/vlessbench && chown 65534 /var/log/vlessbench
  if setpriv --reuid=65534 --regid=65534 --groups="$gid" /opt/vb/vlessbenchd --check --config "$c" >/tmp/with 2>&1
  then echo "with_group ok"; else echo "with_group failed: $(head -c 300 /tmp/with)"; fi
  if setpriv --reuid=65534 --regid=65534 --clear-groups /opt/vb/vlessbenchd --check --config "$c" >/tmp/without 2>&1
  then echo "without_group ok"; else echo "without_group failed: $(head -c 300 /tmp/without)"; fi
}
sh /opt/vb/postinst configure >/dev/null
modes install
reads
chgrp root "$c"; chmod 0644 "$c"
sh /opt/vb/postinst configure 0.1.0 >/dev/null
modes upgrade
chmod 0600 "$c"
sh /opt/vb/postinst configure 0.1.0 >/dev/null
modes admin_mode
rm -f "$c"
sh /opt/vb/vlessbench-firstboot >/dev/null 2>&1
modes firstboot
grep -q '^token = "' "$c" && echo "token_in_config yes"
echo "admin_token $(stat -c '%a %U' /root/admin-token)"
reads
"""


def main() -> int:
    if os.geteuid() != 0:
        print("SKIP: needs root (a mount namespace, overlayfs, chroot)")
        return SKIP
    for tool in ("unshare", "setpriv", "chroot", "groupadd"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} is missing")
            return SKIP
    if not (BIN / "vlessbenchd").exists():
        print(f"vlessbenchd not found in {BIN} (set VLESSBENCH_BIN)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="vlessbench-modes-") as tmp:
        r = subprocess.run(["unshare", "-m", "sh", "-c", OUTSIDE, "sh", tmp, str(REPO), str(BIN / "vlessbenchd")],
                           env={**os.environ, "INSIDE": INSIDE}, capture_output=True, text=True, timeout=120)
    if r.returncode == SKIP:
        print(f"SKIP: no overlayfs over / here: {r.stderr.strip()}")
        return SKIP
    print(r.stdout, end="")
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    got = {}
    for line in r.stdout.splitlines():
        key, _, rest = line.partition(" ")
        got.setdefault(key, []).append(rest)
    want = "640 root vlessbench"
    assert got.get("install") == [want], f"after install: {got.get('install')} (want {want})"
    assert got.get("upgrade") == [want], f"after an upgrade over a 0644 config: {got.get('upgrade')}"
    assert got.get("admin_mode") == ["600 root vlessbench"], f"the admin's own mode: {got.get('admin_mode')}"
    assert got.get("firstboot") == [want], f"after the image's first boot: {got.get('firstboot')}"
    assert got.get("token_in_config") == ["yes"], "first boot wrote no admin token into the config"
    assert got.get("admin_token") == ["600 root"], f"/root/admin-token: {got.get('admin_token')}"
    assert got.get("with_group") == ["ok", "ok"], f"the daemon's group cannot read the config: {got.get('with_group')}"
    without = got.get("without_group", [])
    assert len(without) == 2 and all(w.startswith("failed") and "Permission denied" in w for w in without), \
        f"a user outside the group read the config: {without}"
    print("config modes: 0640 root:vlessbench after install, upgrade and first boot; the group reads it, others not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
