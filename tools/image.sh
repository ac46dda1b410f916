#!/usr/bin/env bash
# The appliance image (issue 25, item 3): a UEFI-bootable raw disk (GPT: an EFI system partition
# holding systemd-boot, the kernel and the initrd; an ext4 root) and a qcow2 of it, minimal Debian 12
# with the vlessbench .deb installed.
#   tools/image.sh [--arch amd64|arm64] [--out DIR]   (default: this machine's arch, DIR=build-image)
# Writes DIR/vlessbench-ARCH.raw and DIR/vlessbench-ARCH.qcow2.
# Why these tools: debootstrap (already what the system test uses, and the only way here to run an
# arm64 second stage through qemu-user), sfdisk + mkfs.vfat/mtools + mkfs.ext4 -d build the disk
# from files without loop devices or mounts (none of them needs a kernel feature a container lacks),
# and systemd-boot (from systemd-boot-efi) needs no grub-install: its EFI binary copied to the
# removable-media path \EFI\BOOT\BOOT{X64,AA64}.EFI plus one loader entry boots on every UEFI
# firmware (OVMF, AAVMF, UTM, Parallels, VMware, VirtualBox) without NVRAM entries.
# Nothing secret is in the image: no /etc/machine-id, no SSH host keys, no vlessbench config (its
# UUID) and no certificate, no password. The first boot makes them (vlessbench-firstboot.service).
# The seed: a disk or CD labelled CIDATA (the cloud-init NoCloud convention: `cloud-localds`, or
# `mkfs.vfat -n CIDATA` with the files copied on) with `user-data` and/or `meta-data`; read without
# cloud-init (it would bring Python), so only these keys, one per line:
#   hostname: NAME   (or local-hostname: NAME in meta-data)
#   password: SECRET (root's console password; without it and without a key, a random one is made
#                     and shown on the console once)
#   ssh_authorized_keys:
#     - ssh-ed25519 AAAA...  (root's authorized_keys)
# Needs root, debootstrap, systemd-container, dosfstools, mtools, fdisk, e2fsprogs, qemu-utils and,
# for arm64 on amd64, qemu-user-static with binfmt (tools/deps.sh --image [--arch arm64]).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(dpkg --print-architecture) out=build-image
while (($#)); do
  case $1 in
    --arch) arch=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: tools/image.sh [--arch amd64|arm64] [--out DIR]" >&2; exit 2 ;;
  esac
done
case $arch in
  amd64) efi=BOOTX64.EFI sdboot=systemd-bootx64.efi console=ttyS0 ;;
  arm64) efi=BOOTAA64.EFI sdboot=systemd-bootaa64.efi console=ttyAMA0 ;;
  *) echo "image.sh: --arch amd64 or arm64" >&2; exit 2 ;;
esac
die() { echo "image.sh: $*" >&2; exit 1; }
# Unmounts every mount point under $1, deepest first (lazily: a process may still hold one).
unmount_under() {
  local m
  awk -v d="$(realpath -m "$1")/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m"; done
}
[[ $(id -u) -eq 0 ]] || die "needs root"
for t in debootstrap systemd-nspawn mkfs.vfat mcopy sfdisk mkfs.ext4 qemu-img; do
  command -v $t >/dev/null || die "$t missing: tools/deps.sh --image installs it"
done
cache=${VLESSBENCH_ROOTFS_CACHE:-/var/cache/vlessbench-test}/image-$arch
include=systemd,systemd-sysv,dbus,udev,kmod,linux-image-$arch,systemd-boot-efi,openssh-server,iproute2
mkdir -p "$cache" "$out"
t0=$SECONDS

# 1. The base rootfs, cached per architecture and include list.
if [[ ! -f $cache/base.ok || $(cat "$cache/base.ok") != "$include" ]]; then
  echo "image.sh: debootstrap bookworm $arch (once; arm64 through qemu-user takes half an hour)" >&2
  # An interrupted second stage leaves proc and sys mounted inside root.tmp: unmount them first,
  # or rm -rf walks into the host's /proc and /sys.
  unmount_under "$cache/root.tmp"
  rm -rf --one-file-system "$cache/root.tmp" "$cache/root"
  if [[ $arch == "$(dpkg --print-architecture)" ]]; then
    debootstrap --arch="$arch" --variant=minbase --include="$include" bookworm "$cache/root.tmp" http://deb.debian.org/debian
  else
    debootstrap --arch="$arch" --variant=minbase --include="$include" --foreign bookworm "$cache/root.tmp" http://deb.debian.org/debian
    trap 'unmount_under "$cache/root.tmp"' EXIT
    chroot "$cache/root.tmp" /debootstrap/debootstrap --second-stage
    unmount_under "$cache/root.tmp"; trap - EXIT
  fi
  mv "$cache/root.tmp" "$cache/root"
  echo "$include" > "$cache/base.ok"
fi

# 2. This build's root: a copy of the base, the .deb installed, the appliance's units, secrets removed.
deb=$(tools/package.sh --arch "$arch" | tail -1)
work=$out/work-$arch
rm -rf "$work"; mkdir -p "$work"
cp -a --reflink=auto "$cache/root" "$work/root"
root=$work/root
cp "$deb" "$root/root/"
nsp() { systemd-nspawn -q -D "$root" --machine=vbimg$$ --register=no --keep-unit --pipe -E DEBIAN_FRONTEND=noninteractive "$@"; }
[[ -s $root/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease ]] || {
  echo "deb http://deb.debian.org/debian bookworm main" > "$root/etc/apt/sources.list"
  nsp apt-get update -qq; }
nsp apt-get install -y -qq --no-install-recommends "/root/$(basename "$deb")" >/dev/null
rm -f "$root/root/$(basename "$deb")"
nsp apt-get clean
rm -rf "/run/systemd/nspawn/propagate/vbimg$$"

install -m 0755 packaging/image/vlessbench-firstboot "$root/usr/local/sbin/vlessbench-firstboot"
install -m 0755 packaging/image/vlessbench-console "$root/usr/local/sbin/vlessbench-console"
install -m 0644 packaging/image/vlessbench-firstboot.service packaging/image/vlessbench-console.service \
  "$root/etc/systemd/system/"
install -m 0644 packaging/image/10-dhcp.network "$root/etc/systemd/network/10-dhcp.network"
nsp systemctl enable systemd-networkd vlessbench-firstboot.service vlessbench-console.service >/dev/null 2>&1
echo vlessbench > "$root/etc/hostname"
printf 'PARTLABEL=vlessbench-root / ext4 rw,errors=remount-ro 0 1\nPARTLABEL=ESP /boot/efi vfat umask=0077,nofail 0 2\n' > "$root/etc/fstab"
mkdir -p "$root/boot/efi"
# The secrets and identities the first boot makes.
rm -f "$root"/etc/ssh/ssh_host_* "$root/etc/vlessbench/vlessbenchd.toml" "$root/var/lib/dbus/machine-id"
rm -rf "$root/var/lib/vlessbench/"*
: > "$root/etc/machine-id"
passwd_field=$(awk -F: '$1=="root"{print $2}' "$root/etc/shadow")
[[ $passwd_field == "*" || $passwd_field == "!"* ]] || die "root has a password in the image"

# 3. The disk: 1 MiB offset, 128 MiB ESP, the rest root (sized from the tree + headroom).
cat > "$work/loader.conf" <<EOF
default vlessbench.conf
timeout 0
EOF
cat > "$work/vlessbench.conf" <<EOF
title vlessbench (Debian 12)
linux /vmlinuz
initrd /initrd.img
options root=PARTLABEL=vlessbench-root rw console=tty0 console=$console net.ifnames=1 quiet
EOF
esp=$work/esp.img
rm -f "$esp"; truncate -s 128M "$esp"; mkfs.vfat -F 32 -n ESP "$esp" >/dev/null
mmd -i "$esp" ::EFI ::EFI/BOOT ::loader ::loader/entries
mcopy -i "$esp" "$root/usr/lib/systemd/boot/efi/$sdboot" "::EFI/BOOT/$efi"
mcopy -i "$esp" "$work/loader.conf" ::loader/loader.conf
mcopy -i "$esp" "$work/vlessbench.conf" ::loader/entries/vlessbench.conf
mcopy -i "$esp" "$(readlink -f "$root/vmlinuz")" ::vmlinuz
mcopy -i "$esp" "$(readlink -f "$root/initrd.img")" ::initrd.img
used=$(du -sm "$root" | cut -f1)
rootmb=$(( used + used / 2 + 256 ))
rootimg=$work/root.img
rm -f "$rootimg"; mkfs.ext4 -q -F -L vlessbench-root -d "$root" "$rootimg" "${rootmb}M"
raw=$out/vlessbench-$arch.raw
rm -f "$raw"; truncate -s $(( (1 + 128 + rootmb + 1) ))M "$raw"
sfdisk -q "$raw" <<EOF
label: gpt
start=1MiB, size=128MiB, type=uefi, name=ESP
start=129MiB, size=${rootmb}MiB, type=linux, name=vlessbench-root
EOF
dd if="$esp" of="$raw" bs=1M seek=1 conv=notrunc status=none
dd if="$rootimg" of="$raw" bs=1M seek=129 conv=notrunc status=none
qemu-img convert -O qcow2 -c "$raw" "$out/vlessbench-$arch.qcow2"
rm -rf "$work"
echo "image.sh: $raw ($(du -h --apparent-size "$raw" | cut -f1)) and $out/vlessbench-$arch.qcow2 ($(du -h "$out/vlessbench-$arch.qcow2" | cut -f1)) in $((SECONDS - t0)) s" >&2
echo "$raw"
