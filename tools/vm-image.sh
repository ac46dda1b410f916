#!/usr/bin/env bash
# Boots an appliance image (tools/image.sh) under TCG with UEFI firmware, on a tap inside a network
# namespace this script creates. The image takes its address by DHCP, as on a hypervisor: dnsmasq in
# the namespace leases the one address 10.77.0.2 (dnsmasq-base, tools/deps.sh --image).
#   tools/vm-image.sh start --arch amd64|arm64 [--image FILE]   boot, wait for http://10.77.0.2:8080/
#   tools/vm-image.sh stop                                       power off, delete the namespace
#   tools/vm-image.sh admin                                      admin URL and, second line, its token
#   tools/vm-image.sh links                                      the share links the guest printed
#   tools/vm-image.sh exec CMD                                   CMD in the host-side namespace
# amd64: qemu-system-x86_64 -M q35 with OVMF; arm64: qemu-system-aarch64 -M virt -cpu max with
# AAVMF (qemu-efi-aarch64). The image is booted from a qcow2 overlay, so it stays pristine.
set -euo pipefail
cd "$(dirname "$0")/.."
state=/run/vlessbench-vm-image
ns=vlessbench-vmi
tap=vbitap0
host_ip=10.77.0.1
guest_ip=10.77.0.2
die() { echo "vm-image.sh: $*" >&2; exit 1; }

start() {
  local arch=amd64 image=
  while (($#)); do
    case $1 in --arch) arch=$2; shift 2 ;; --image) image=$2; shift 2 ;; *) die "unknown '$1'" ;; esac
  done
  image=${image:-build-image/vlessbench-$arch.qcow2}
  [[ -f $image ]] || die "$image missing: tools/image.sh --arch $arch"
  [[ -e $state/qemu.pid ]] && kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null && die "already running"
  command -v dnsmasq >/dev/null || die "dnsmasq missing: tools/deps.sh --image installs it"
  rm -rf "$state"; mkdir -p "$state"
  qemu-img create -q -f qcow2 -F qcow2 -b "$(readlink -f "$image")" "$state/disk.qcow2"
  # The seed (docs/deploy.md, section 9): hostname and the admin token the runner verifies with.
  local token; token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  printf '#cloud-config\nhostname: vlessbench-%s\nvlessbench_admin_token: %s\n' "$arch" "$token" > "$state/user-data"
  truncate -s 4M "$state/seed.img"; mkfs.vfat -n CIDATA "$state/seed.img" >/dev/null
  mcopy -i "$state/seed.img" "$state/user-data" ::user-data
  (umask 077; printf 'http://%s:9090\n%s\n' "$guest_ip" "$token" > "$state/admin.txt")
  local qemu
  case $arch in
    amd64)
      cp /usr/share/OVMF/OVMF_VARS_4M.fd "$state/vars.fd"
      qemu=(qemu-system-x86_64 -M q35 -accel tcg -cpu max
            -drive if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd
            -drive "if=pflash,format=raw,file=$state/vars.fd") ;;
    arm64)
      cp /usr/share/AAVMF/AAVMF_VARS.fd "$state/vars.fd"
      qemu=(qemu-system-aarch64 -M virt -accel tcg -cpu max
            -drive if=pflash,format=raw,readonly=on,file=/usr/share/AAVMF/AAVMF_CODE.fd
            -drive "if=pflash,format=raw,file=$state/vars.fd") ;;
    *) die "--arch amd64 or arm64" ;;
  esac
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" tuntap add dev "$tap" mode tap
  ip -n "$ns" addr add "$host_ip/24" dev "$tap"
  ip -n "$ns" link set "$tap" up
  ip netns exec "$ns" dnsmasq --pid-file="$state/dnsmasq.pid" --interface="$tap" --bind-interfaces \
    --dhcp-range="$guest_ip,$guest_ip,255.255.255.0,1h" --port=0 --leasefile-ro --no-resolv
  local t0=$SECONDS
  ip netns exec "$ns" "${qemu[@]}" -m 1024 -smp 2 \
    -drive "file=$state/disk.qcow2,format=qcow2,if=virtio" -drive "file=$state/seed.img,format=raw,if=virtio" \
    -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" -device virtio-net-pci,netdev=n0 \
    -display none -monitor none -serial "file:$state/console.log" -daemonize -pidfile "$state/qemu.pid"
  for _ in $(seq 900); do
    if ip netns exec "$ns" curl -s -o /dev/null --max-time 1 "http://$guest_ip:8080/"; then
      echo "vm-image.sh: $arch image up, vlessbenchd answering on $guest_ip:8080 after $((SECONDS - t0)) s (TCG)" >&2
      return
    fi
    kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null || { tail -20 "$state/console.log" >&2; die "qemu exited"; }
    sleep 1
  done
  tail -30 "$state/console.log" >&2
  stop
  die "the guest's daemon did not answer within 900 s"
}

stop() {
  local f pid
  for f in qemu dnsmasq; do
    [[ -e $state/$f.pid ]] || continue
    pid=$(cat "$state/$f.pid"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$state"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  admin) cat "$state/admin.txt" ;;
  links) tr -d '\r' < "$state/console.log" | grep -o 'vless://[^ ]*' | sort -u ;;  # the serial log has CRLF
  exec) shift; exec ip netns exec "$ns" "$@" ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
