#!/usr/bin/env bash
# The seed's topology, host -> VM: the system test's Debian 12 rootfs booted as a real guest with
# qemu (its own Debian kernel), the .deb installed, networked through a tap device inside a network
# namespace this script creates (host side 10.77.0.1, guest 10.77.0.2). The runner runs in that
# namespace, so every packet crosses a virtual NIC and the guest's TCP stack answers the client's
# ACKs itself. (Not qemu's user-mode networking: its hostfwd terminates TCP in the qemu process,
# so the server's ACK policy no longer reaches the client; docs/methodology.md, pitfalls.)
#   tools/vm.sh start     build the image if needed, boot, wait for the daemon (TCG: about a minute)
#   tools/vm.sh stop      power the guest off and delete the namespace
#   tools/vm.sh links     the guest's share links (vless://...) for the runner
#   tools/vm.sh admin     the guest's admin listener (http://10.77.0.2:9090) and, on a second line,
#                         its token: `vlessbench verify DIR --daemon URL --token TOKEN` fetches a
#                         run's lines from the guest's access log (docs/runner.md)
#   tools/vm.sh exec CMD  run CMD in the host-side namespace, e.g. tools/vm.sh exec build/bin/vlessbench run ...
#   tools/vm.sh guest CMD run the shell line CMD as root inside the guest, print its output, exit with its
#                         status (a test-only channel: a shell on the guest's second serial port, a unix
#                         socket on the host; the guest has iproute2's tc for checks, the product never
#                         shells out). VLESSBENCH_VM_TIMEOUT=SECONDS bounds the wait (default 120).
# VLESSBENCH_PACKAGE_BUILD=DIR: package that Release tree (tools/package.sh) instead of build-deb/build.
# VLESSBENCH_VM_ACCEL=kvm to try KVM (on these machines the Debian kernel hung early under it;
# TCG is the default). Needs root, qemu-system-x86, systemd-container, debootstrap, e2fsprogs
# (tools/deps.sh --vm installs them).
# The guest's config is the package's (VLESSBENCH_VM_CONFIG=FILE: that file instead, e.g. listeners with
# `emulate`, tests/integration/test_vm_emulate.py), plus an [admin] listener on the guest's address with a
# random token (so the runner can fetch its runs' log lines) and [limits] udp_idle_timeout_ms =
# 5000 (a UDP flow's udp.packet line comes 5 s after its last datagram, not 60 s).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
cache=${VLESSBENCH_ROOTFS_CACHE:-/var/cache/vlessbench-test}
vm=$cache/vm                 # kernel-bearing copy of the rootfs, kept between runs
state=/run/vlessbench-vm     # the running guest: disk image, console log, pid, links
ns=vlessbench-vm
tap=vbtap0
host_ip=10.77.0.1
guest_ip=10.77.0.2
accel=${VLESSBENCH_VM_ACCEL:-tcg}

die() { echo "vm.sh: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "$1 missing: tools/deps.sh --vm installs it (apt-get install $2)"; }

nspawn() {  # nspawn ROOT CMD...: a command in ROOT, host network (the apt mirror), no registration
  local root=$1; shift
  systemd-nspawn -q -D "$root" --machine=vbvm$$ --register=no --keep-unit --pipe \
    -E DEBIAN_FRONTEND=noninteractive --bind="$cache/apt-archives:/var/cache/apt/archives" "$@"
  rm -rf "/run/systemd/nspawn/propagate/vbvm$$"
}

build_base() {
  # The system test's rootfs (one debootstrap for both), plus a kernel and a static address.
  [[ -f $vm/base.ok && -e $vm/root/vmlinuz && -e $vm/root/usr/local/sbin/vb-guest-shell ]] && return
  echo "vm.sh: building $vm (once): rootfs + linux-image-amd64 + iproute2" >&2
  VLESSBENCH_ROOTFS_CACHE=$cache python3 -c "import sys; sys.path.insert(0, 'tests/system');
import test_deb_nspawn as t; t.ARCHIVES.mkdir(parents=True, exist_ok=True); t.ensure_rootfs(t.arch_named(t.native_arch()))"
  rm -rf "$vm"
  mkdir -p "$vm" "$cache/apt-archives/partial"
  cp -a --reflink=auto "$cache/bookworm" "$vm/root"
  nspawn "$vm/root" apt-get install -y -qq --no-install-recommends linux-image-amd64 iproute2 >/dev/null
  guest_shell "$vm/root"
  mkdir -p "$vm/root/etc/systemd/network"
  printf '[Match]\nName=eth0\n\n[Network]\nAddress=%s/24\n' "$guest_ip" > "$vm/root/etc/systemd/network/10-eth0.network"
  nspawn "$vm/root" systemctl enable systemd-networkd >/dev/null 2>&1
  echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$vm/root/etc/fstab"
  echo vlessbench-vm > "$vm/root/etc/hostname"
  touch "$vm/base.ok"
}

guest_shell() {  # guest_shell ROOT: the test-only command channel on ttyS1 (`guest` below)
  local root=$1
  mkdir -p "$root/usr/local/sbin"
  cat > "$root/usr/local/sbin/vb-guest-shell" <<'SH'
#!/bin/sh
# Test-only (tools/vm.sh guest): reads "NONCE COMMAND" lines on ttyS1, runs each COMMAND with sh,
# answers its output and a "__vb_rc_NONCE=STATUS" line.
stty -F /dev/ttyS1 raw -echo
exec </dev/ttyS1 >/dev/ttyS1 2>&1
while IFS=' ' read -r nonce line; do
  sh -c "$line" </dev/null
  echo "__vb_rc_$nonce=$?"
done
SH
  chmod 0755 "$root/usr/local/sbin/vb-guest-shell"
  printf '[Unit]\nDescription=tools/vm.sh guest: test-only shell on ttyS1\n\n[Service]\nExecStart=/usr/local/sbin/vb-guest-shell\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n' \
    > "$root/etc/systemd/system/vb-guest-shell.service"
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -sf /etc/systemd/system/vb-guest-shell.service "$root/etc/systemd/system/multi-user.target.wants/vb-guest-shell.service"
}

guest() {  # guest CMD: runs CMD in the guest through the ttyS1 shell
  [[ -S $state/guest.sock ]] || die "no guest running (tools/vm.sh start)"
  python3 - "$state/guest.sock" "$*" "${VLESSBENCH_VM_TIMEOUT:-120}" <<'PY'
import os, re, socket, sys, time
path, cmd, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
nonce = os.urandom(6).hex()
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(f"{nonce} {cmd}\n".encode())
end = time.monotonic() + timeout
buf = b""
marker = re.compile(rb"__vb_rc_" + nonce.encode() + rb"=(\d+)\n")
while not (m := marker.search(buf)):
    left = end - time.monotonic()
    if left <= 0:
        sys.exit(f"vm.sh guest: no answer within {timeout:.0f} s")
    s.settimeout(left)
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        continue
    if not chunk:
        sys.exit("vm.sh guest: the guest's channel closed")
    buf += chunk
sys.stdout.buffer.write(buf[:m.start()])
sys.exit(int(m.group(1)))
PY
}

start() {
  [[ $(id -u) -eq 0 ]] || die "needs root"
  need qemu-system-x86_64 qemu-system-x86; need systemd-nspawn systemd-container
  need debootstrap debootstrap; need mkfs.ext4 e2fsprogs
  [[ -e $state/qemu.pid ]] && kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null && die "already running (tools/vm.sh stop)"
  local deb
  deb=$(tools/package.sh | tail -1)
  build_base
  rm -rf "$state"; mkdir -p "$state"/{upper,work,root}
  # The image: the kernel-bearing rootfs + this .deb (its postinst makes the config and UUID).
  mount -t overlay overlay -o "lowerdir=$vm/root,upperdir=$state/upper,workdir=$state/work" "$state/root"
  trap 'umount "$state/root" 2>/dev/null || true' EXIT
  cp "$deb" "$state/root/root/"
  nspawn "$state/root" apt-get install -y -qq --no-install-recommends "/root/$(basename "$deb")" >/dev/null
  if [[ -n ${VLESSBENCH_VM_CONFIG:-} ]]; then
    install -m 0640 -g "$(stat -c %g "$state/root/etc/vlessbench/vlessbenchd.toml")" "$VLESSBENCH_VM_CONFIG" \
      "$state/root/etc/vlessbench/vlessbenchd.toml"
  fi
  local token; token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  printf '\n[admin]\nlisten = "%s:9090"\ntoken = "%s"\n\n[limits]\nudp_idle_timeout_ms = 5000\n' "$guest_ip" "$token" \
    >> "$state/root/etc/vlessbench/vlessbenchd.toml"
  (umask 077; printf 'http://%s:9090\n%s\n' "$guest_ip" "$token" > "$state/admin.txt")
  # `links` parses the config: an [admin] or [limits] it refuses stops here, not at the guest's boot.
  # The tree tools/package.sh packaged: VLESSBENCH_PACKAGE_BUILD, else build/ when it has the
  # package's flags (it has then just built vlessbenchd there), else build-deb/build.
  local tree=${VLESSBENCH_PACKAGE_BUILD:-build-deb/build}
  if [[ -z ${VLESSBENCH_PACKAGE_BUILD:-} && ! -x $tree/bin/vlessbenchd && -x build/bin/vlessbenchd ]]; then tree=build; fi
  "$tree/bin/vlessbenchd" links --config "$state/root/etc/vlessbench/vlessbenchd.toml" \
    --host "$guest_ip" --no-qr > "$state/links.txt"
  cp -L "$vm/root/vmlinuz" "$state/vmlinuz"; cp -L "$vm/root/initrd.img" "$state/initrd.img"
  mkfs.ext4 -q -F -d "$state/root" "$state/disk.img" 3G
  umount "$state/root"; trap - EXIT
  rm -rf "$state/upper" "$state/work" "$state/root"

  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" tuntap add dev "$tap" mode tap
  ip -n "$ns" addr add "$host_ip/24" dev "$tap"
  ip -n "$ns" link set "$tap" up
  local t0=$SECONDS
  ip netns exec "$ns" qemu-system-x86_64 -accel "$accel" -m 1024 -smp 1 \
    -kernel "$state/vmlinuz" -initrd "$state/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet" \
    -drive "file=$state/disk.img,format=raw,if=virtio" \
    -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" -device virtio-net-pci,netdev=n0 \
    -display none -monitor none -serial "file:$state/console.log" \
    -serial "unix:$state/guest.sock,server=on,wait=off" -daemonize -pidfile "$state/qemu.pid"
  for _ in $(seq 300); do
    if ip netns exec "$ns" curl -s -o /dev/null --max-time 1 "http://$guest_ip:8080/"; then
      echo "vm.sh: guest up, vlessbenchd answering on $guest_ip:8080 after $((SECONDS - t0)) s ($accel)" >&2
      echo "vm.sh: run the runner with: tools/vm.sh exec build/bin/vlessbench run --target http://$guest_ip:8080/ --path ..." >&2
      return
    fi
    kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null || { tail -20 "$state/console.log" >&2; die "qemu exited"; }
    sleep 1
  done
  tail -20 "$state/console.log" >&2
  stop
  die "the guest's daemon did not answer within 300 s (console: above)"
}

stop() {
  if [[ -e $state/qemu.pid ]]; then
    local pid; pid=$(cat "$state/qemu.pid")
    kill "$pid" 2>/dev/null || true   # a test VM with nothing to save: qemu exits at once
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$state"
}

case "${1:-}" in
  start) start ;;
  base) build_base ;;
  stop) stop ;;
  links) grep '^vless://' "$state/links.txt" ;;
  admin) cat "$state/admin.txt" ;;
  exec) shift; exec ip netns exec "$ns" "$@" ;;
  guest) shift; guest "$@" ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
