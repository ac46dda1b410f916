#!/usr/bin/env bash
# The appliance image booted and measured (issue 25, item 4): tools/image.sh, tools/vm-image.sh
# (TCG + UEFI, tap in a namespace), then the seed's pair through it from the host side: the
# Nagle-prone client stalls on the default-ACK node and not on the QUICKACK one, every sample
# verified against the guest's log. Outside CI (root, minutes): amd64 about 3 min with the base
# rootfs cached; arm64 longer (its debootstrap through qemu-user once, then TCG aarch64).
#   tests/system/test_image_boot.sh [--arch amd64|arm64]
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${2:-amd64}; [[ ${1:-} == --arch ]] || arch=$(dpkg --print-architecture)
out=$(mktemp -d)
trap 'tools/vm-image.sh stop; rm -rf "$out"' EXIT
tools/image.sh --arch "$arch" >/dev/null
tools/vm-image.sh start --arch "$arch"
# The console unit prints the links after the daemon answers: wait for them, bounded.
# (`links` exits 1 while the console has printed none yet: under set -e that must not end the test.)
links=
for _ in $(seq 180); do
  links=$(tools/vm-image.sh links || true); grep -q '#quickack-default$' <<<"$links" && break; sleep 1
done
k=$(grep '#default-ack-default$' <<<"$links" || true); q=$(grep '#quickack-default$' <<<"$links" || true)
[[ -n $k && -n $q ]] || { echo "image boot test: the console printed no default-ack/quickack links within 180 s" >&2; exit 1; }
# The index page a browser gets at http://VM:8080/ (the first boot turns index_links on): the
# nodes with their links (the UUID in them) and a QR code each; a plain GET is still the target's.
page=$(tools/vm-image.sh exec curl -sf -m 30 -H 'Accept: text/html' http://10.77.0.2:8080/ || true)
uuid=${k#vless://}; uuid=${uuid%%@*}
for want in default-ack-default quickack-default "$uuid" '<svg'; do
  grep -qF -- "$want" <<<"$page" || { echo "image boot test: the index page lacks '$want'" >&2; exit 1; }
done
[[ $(tools/vm-image.sh exec curl -sf -m 30 http://10.77.0.2:8080/) == "vlessbench target" ]] ||
  { echo "image boot test: a plain GET / no longer answers 'vlessbench target'" >&2; exit 1; }
echo "image boot test: index page lists the nodes with links and QR codes ($(grep -o '<svg' <<<"$page" | wc -l) codes)"
# The runner: the tree tools/package.sh built the package from (build/ when its flags are the
# package's, else build-deb/build), or VLESSBENCH_PACKAGE_BUILD.
bin=${VLESSBENCH_PACKAGE_BUILD:-build-deb/build}/bin
[[ -x $bin/vlessbench || -n ${VLESSBENCH_PACKAGE_BUILD:-} ]] || bin=build/bin
[[ -x $bin/vlessbench ]] || { echo "image boot test: no runner at $bin/vlessbench (build it: cmake --build build --target vlessbench)" >&2; exit 1; }
timeout 900 tools/vm-image.sh exec "$bin/vlessbench" run --target http://10.77.0.2:8080/ \
  --path "nagle-kernel=$k" --path "nagle-quickack=$q" --nagle-paths nagle-kernel,nagle-quickack \
  --new 20 --reuse 20 --warmup 3 --out "$out/run" --verify \
  --daemon "$(tools/vm-image.sh admin | sed -n 1p)" --token "$(tools/vm-image.sh admin | sed -n 2p)"
python3 - "$out/run/summary.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["paths"]
k, q = p["nagle-kernel"]["stall"], p["nagle-quickack"]["stall"]
assert k["verdict"] == "stall" and not k["terminated_in_between"], k
assert q["verdict"] == "none" and q["stalled"] == 0, q
print(f"image boot test: default-ack {k['stalled']}/{k['with_timing']} stalled, quickack {q['stalled']}/{q['with_timing']}")
PY
