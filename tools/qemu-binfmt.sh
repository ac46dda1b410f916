#!/usr/bin/env bash
# Makes this machine run another architecture's binaries through qemu-user (issue 25):
#   tools/qemu-binfmt.sh [ARCH]    (ARCH: a Debian architecture, arm64 by default)
# Mounts binfmt_misc when it is not, and registers qemu-user-static's handler for ARCH from
# /usr/lib/binfmt.d (what systemd-binfmt does at boot, for machines that do not run it, as a
# container does not). The handler has the F flag: the kernel opens the interpreter now, so it works
# inside a chroot or systemd-nspawn rootfs without a copy of qemu there. Idempotent; exit 1 with what
# is missing.
set -euo pipefail
arch=${1:-arm64}
case $arch in
  arm64) qemu=aarch64 ;;  # the one foreign architecture the package and its tests are built for
  *) echo "qemu-binfmt: '$arch' is not handled (arm64 is)" >&2; exit 2 ;;
esac
conf=/usr/lib/binfmt.d/qemu-$qemu.conf
dir=/proc/sys/fs/binfmt_misc
[[ -r $conf ]] || { echo "qemu-binfmt: $conf missing: apt-get install qemu-user-static (tools/deps.sh --arch $arch)" >&2; exit 1; }
if [[ ! -e $dir/register ]]; then
  mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null ||
    { echo "qemu-binfmt: cannot mount binfmt_misc on $dir (needs root, and a kernel with CONFIG_BINFMT_MISC)" >&2; exit 1; }
fi
if [[ ! -e $dir/qemu-$qemu ]]; then
  # One line ":name:type:offset:magic:mask:interpreter:flags" (binfmt.d(5) allows comments too).
  grep -v '^[#;]' "$conf" | grep -m1 . > "$dir/register" ||
    { echo "qemu-binfmt: the kernel refused $conf" >&2; exit 1; }
fi
grep -qx enabled "$dir/qemu-$qemu" || echo 1 > "$dir/qemu-$qemu"
grep -q '^flags: .*F' "$dir/qemu-$qemu" ||
  echo "qemu-binfmt: warning: qemu-$qemu is registered without the F flag: a rootfs needs its own copy of qemu" >&2
