#!/usr/bin/env bash
# Builds the Debian package from this checkout: build-deb/vlessbench_<version>_<arch>.deb
#   tools/package.sh [--lintian]      (--lintian: also run lintian on it; exit non-zero on an error tag)
# Daemon, runner, unit, docs, example config, and the config template the postinst makes
# /etc/vlessbench/vlessbenchd.toml from (its user UUID made on the machine it is installed on).
# dpkg-deb, with Depends computed by dpkg-shlibdeps from the binaries themselves; the file list is
# `cmake --install`'s, so building in the VM and the package install the same things. Incremental:
# build-deb/build is reused; the package is staged anew every time.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=$src/build-deb
build=$out/build
stage=$out/stage
jobs=${VLESSBENCH_JOBS:-2}

command -v dpkg-shlibdeps >/dev/null || { echo "dpkg-shlibdeps missing: apt-get install dpkg-dev" >&2; exit 1; }
# Debian's layout: binaries in /usr/bin, config in /etc, the unit in /lib/systemd/system (bookworm
# packages still ship units there), no config written at install (postinst does it, on the VM).
# Compiled exactly as the measured Release tree; linked with full RELRO (lintian's bindnow) since
# that costs nothing after start.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_SYSCONFDIR=/etc -DVLESSBENCH_SYSTEMD_UNIT_DIR=/lib/systemd/system \
  -DVLESSBENCH_INSTALL_CONFIG=OFF -DVLESSBENCH_TESTS=OFF -DVLESSBENCH_RUNNER_OPENSSL=OFF \
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,relro -Wl,-z,now" >/dev/null
cmake --build "$build" -j "$jobs" --target vlessbenchd vlessbench

rm -rf "$stage"
DESTDIR=$stage cmake --install "$build" --strip >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
doc=$stage/usr/share/doc/vlessbench
install -m 0644 packaging/deb/copyright "$doc/copyright"
install -D -m 0644 packaging/deb/lintian-overrides "$stage/usr/share/lintian/overrides/vlessbench"
printf 'vlessbench (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' "$version" "$version" \
  "$(sed -n 's/^Maintainer: //p' packaging/deb/control.in)" \
  "$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")" | gzip -9n > "$doc/changelog.gz"

# dpkg-shlibdeps wants a debian/control to read; it only needs the source stanza.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debian"
printf 'Source: vlessbench\n\nPackage: vlessbench\nArchitecture: any\n' > "$tmp/debian/control"
# (It warns that the binaries are not under debian/PACKAGE: a debhelper layout we do not use.)
depends=$(cd "$tmp" && dpkg-shlibdeps -O "$stage/usr/bin/vlessbenchd" "$stage/usr/bin/vlessbench" \
  2> >(grep -v "should already be installed in their package's directory" >&2) | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$stage/DEBIAN"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$stage/DEBIAN/"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
  packaging/deb/control.in > "$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"
find "$stage" -type d -exec chmod 0755 {} +

deb=$out/vlessbench_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
echo "Depends: $depends" >&2
if [[ "${1:-}" == "--lintian" ]]; then
  command -v lintian >/dev/null || { echo "lintian missing: apt-get install lintian" >&2; exit 1; }
  # Each remaining tag is overridden with its reason in packaging/deb/lintian-overrides.
  lintian --fail-on error,warning "$deb" >&2
fi
