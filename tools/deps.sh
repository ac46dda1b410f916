#!/usr/bin/env bash
# Installs the Debian 12 packages vlessbench builds and tests with, if any is missing.
# Usage: tools/deps.sh [--test]   (--test adds what only the test suite needs: clang, its fuzzer
# runtime, clang-tidy; and for the system test and the package: debootstrap, systemd-nspawn,
# iproute2, dpkg-dev (dpkg-shlibdeps), lintian; chromium for the browser tests,
# tests/integration/test_probe_page.py and test_admin.py; nftables for the tun path's test,
# test_tun_path.py; prometheus for its promtool only (test_admin.py: promtool check metrics):
# the Prometheus server it brings is kept from starting; bind9-dnsutils for dig, test_dig.py)
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config python3 curl
      libasio-dev android-libboringssl-dev libspdlog-dev libtomlplusplus-dev catch2
      libcli11-dev nlohmann-json3-dev libsystemd-dev libqrencode-dev libnghttp2-dev libssl-dev v2ray
      socat haproxy ccache)  # socat, haproxy: bench/run.py's plain-relay and TLS-terminator floors
                             # (test_bench_tools runs haproxy too); ccache: rebuilds compile what changed
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(clang-14 libclang-rt-14-dev clang-tidy-14 debootstrap systemd-container iproute2 dpkg-dev lintian chromium nftables prometheus bind9-dnsutils)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
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
exit "$status"
