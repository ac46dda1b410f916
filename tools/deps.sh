#!/usr/bin/env bash
# Installs the Debian 12 packages vlessbench builds and tests with, if any is missing.
# Usage: tools/deps.sh [--test] [--vm] [--image] [--arch arm64]
#   --test adds what only the test suite needs: clang, its fuzzer runtime, clang-tidy, clang-format
#     (tests/format/check_format.py); and for the
#     system test and the package: debootstrap, systemd-nspawn, iproute2, dpkg-dev (dpkg-shlibdeps),
#     lintian; chromium for the browser tests, tests/integration/test_probe_page.py and
#     test_admin.py; nftables for the tun path's test, test_tun_path.py; prometheus for its promtool
#     only (test_admin.py: promtool check metrics): the Prometheus server it brings is kept from
#     starting; bind9-dnsutils for dig, test_dig.py; zbar-tools (zbarimg) to read the index page's QR
#     codes as chromium draws them, test_index_page.py
#   --vm adds what tools/vm.sh and `tools/demo.sh --vm` need: qemu-system-x86 (the guest),
#     systemd-container (systemd-nspawn, to install the .deb into its image), debootstrap (the
#     image), e2fsprogs (mkfs.ext4 -d), iproute2 (the namespace and tap), dpkg-dev (dpkg-shlibdeps)
#   --image adds what tools/image.sh and tools/vm-image.sh need: debootstrap, systemd-container,
#     dosfstools + mtools (the EFI partition without a mount), fdisk (sfdisk), e2fsprogs, qemu-utils
#     (qcow2), qemu-system-x86 + ovmf, qemu-system-arm + qemu-efi-aarch64 (the UEFI boots under TCG),
#     dnsmasq-base (the DHCP lease on the test tap), iproute2, curl
#   --arch arm64 (on amd64) adds what `tools/package.sh --arch arm64` cross-compiles with (issue 25):
#     arm64 as a dpkg foreign architecture, crossbuild-essential-arm64, the :arm64 libraries, and
#     qemu-user-static with its binfmt_misc handler (tools/qemu-binfmt.sh) to run what it builds
#     (the arm64 system test boots the package through it).
set -euo pipefail
cd "$(dirname "$0")/.."
test=0 vm=0 image=0 arch=
while (($#)); do
  case $1 in
    --test) test=1; shift ;;
    --vm) vm=1; shift ;;
    --image) image=1; shift ;;
    --arch) [[ $# -ge 2 ]] || { echo "--arch needs a value (arm64)" >&2; exit 2; }; arch=$2; shift 2 ;;
    --arch=*) arch=${1#--arch=}; shift ;;
    *) echo "unknown argument '$1' (usage: tools/deps.sh [--test] [--vm] [--image] [--arch arm64])" >&2; exit 2 ;;
  esac
done
pkgs=(cmake ninja-build g++ pkg-config python3 curl
      libasio-dev android-libboringssl-dev libspdlog-dev libtomlplusplus-dev catch2
      libcli11-dev nlohmann-json3-dev libsystemd-dev libqrencode-dev libnghttp2-dev libssl-dev v2ray
      libnl-3-dev libnl-route-3-dev
      socat haproxy ccache)  # socat, haproxy: bench/run.py's plain-relay and TLS-terminator floors
                             # (test_bench_tools runs haproxy too); ccache: rebuilds compile what changed
if ((test)); then
  pkgs+=(clang-14 libclang-rt-14-dev clang-tidy-14 clang-format-14 debootstrap systemd-container iproute2 dpkg-dev lintian chromium nftables prometheus bind9-dnsutils zbar-tools)
fi
if ((vm)); then
  pkgs+=(qemu-system-x86 systemd-container debootstrap e2fsprogs iproute2 dpkg-dev)
fi
if ((image)); then
  pkgs+=(debootstrap systemd-container dosfstools mtools fdisk e2fsprogs qemu-utils qemu-system-x86 ovmf
         qemu-system-arm qemu-efi-aarch64 dnsmasq-base iproute2 curl dpkg-dev)
fi
sudo=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then
  sudo=(sudo)
fi
if [[ -n $arch && $arch != "$(dpkg --print-architecture)" ]]; then
  [[ $arch == arm64 && $(dpkg --print-architecture) == amd64 ]] ||
    { echo "--arch $arch: only arm64 is cross-built, on amd64" >&2; exit 2; }
  # The header-only libraries (asio, CLI11, nlohmann-json) are Architecture: all; BoringSSL's -dev is
  # Multi-Arch: foreign (its :arm64 copy would replace this machine's), so only its runtime library
  # comes as :arm64 and the headers, the same for every architecture, from the native -dev.
  pkgs+=(crossbuild-essential-arm64 dpkg-dev qemu-user-static android-libboringssl:arm64
         libspdlog-dev:arm64 libtomlplusplus-dev:arm64 libsystemd-dev:arm64 libqrencode-dev:arm64
         libnghttp2-dev:arm64 libnl-3-dev:arm64 libnl-route-3-dev:arm64)
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "adding arm64 as a foreign architecture (dpkg --add-architecture arm64)" >&2
    "${sudo[@]}" dpkg --add-architecture arm64
  fi
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
binfmt() {
  if [[ -n $arch && $arch != "$(dpkg --print-architecture)" ]]; then "${sudo[@]}" tools/qemu-binfmt.sh "$arch"; fi
}
if ((${#missing[@]} == 0)); then
  binfmt
  exit 0
fi
echo "installing: ${missing[*]}" >&2
if [[ $(id -u) -ne 0 && ${#sudo[@]} -eq 0 ]]; then
  echo "need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# Services a package would start at install (the prometheus server) stay stopped: policy-rc.d 101
# ("action forbidden"), only for this install and only when no policy is in place already.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
  own_policy=1
fi
status=0
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
if ((own_policy)); then "${sudo[@]}" rm -f "$policy"; fi
# Under systemd the unit is enabled all the same: disabled, so a reboot does not start it either.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
  "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
# haproxy's packaged service (on :80 by its default config) likewise: the bench runs its own.
if [[ " ${missing[*]} " == *" haproxy "* ]] && command -v systemctl >/dev/null; then
  "${sudo[@]}" systemctl disable --now haproxy >/dev/null 2>&1 || true
fi
if ((status == 0)); then binfmt; fi
exit "$status"
