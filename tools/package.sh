#!/usr/bin/env bash
# Builds the Debian package from this checkout: build-deb/vlessbench_<version>_<arch>.deb
#   tools/package.sh [--arch amd64|arm64] [--lintian]
#     --arch   the package's architecture: this machine's (the default), or arm64 cross-compiled on
#              amd64 (cmake/aarch64-linux-gnu.cmake, the arm64 preset's tree build-arm64/; the
#              :arm64 libraries from tools/deps.sh --arch arm64)
#     --lintian  also run lintian on it; exit non-zero on an error or warning tag
# Daemon, runner, unit, docs, example config, and the config template the postinst makes
# /etc/vlessbench/vlessbenchd.toml from (its user UUID made on the machine it is installed on).
# dpkg-deb, with Depends computed by dpkg-shlibdeps from the binaries themselves (for arm64 against
# the :arm64 libraries' shlibs); the file list is `cmake --install`'s, so building in the VM and the
# package install the same things. The package is staged anew every time.
#
# Which tree is built (issue 30 item 10: a second tree from scratch took 19 min):
#   - VLESSBENCH_PACKAGE_BUILD=DIR: that tree, configured with tools/package-flags.sh (tools/test.sh
#     passes build/, so the suite tests the very binaries it packages);
#   - otherwise build/ when it was configured with the package's flags (tools/package-flags.sh, as
#     tools/test.sh and the README's build commands do): only vlessbenchd and vlessbench are built in
#     it, nothing else changes there; a build/ with other flags is left alone, and the keys that
#     differ are named;
#   - otherwise build-deb/build, a tree of its own, reused by the next run;
#   - --arch arm64: always build-arm64/ (cmake --preset arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=$src/build-deb
jobs=${VLESSBENCH_JOBS:-2}
native=$(dpkg --print-architecture)
arch=$native
lintian=0
while (($#)); do
  case $1 in
    --arch) [[ $# -ge 2 ]] || { echo "--arch needs a value: amd64 or arm64" >&2; exit 2; }; arch=$2; shift 2 ;;
    --arch=*) arch=${1#--arch=}; shift ;;
    --lintian) lintian=1; shift ;;
    *) echo "unknown argument '$1' (usage: tools/package.sh [--arch amd64|arm64] [--lintian])" >&2; exit 2 ;;
  esac
done
if [[ $arch != "$native" && ! ($arch == arm64 && $native == amd64) ]]; then
  echo "--arch $arch: this script builds for this machine ($native) or arm64 cross-compiled on amd64" >&2
  exit 2
fi
stage=$out/stage-$arch
command -v dpkg-shlibdeps >/dev/null || { echo "dpkg-shlibdeps missing: apt-get install dpkg-dev" >&2; exit 1; }
command -v dpkg-architecture >/dev/null || { echo "dpkg-architecture missing: apt-get install dpkg-dev" >&2; exit 1; }
multiarch=$(CC=false dpkg-architecture -a "$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
source tools/package-flags.sh

# Does the tree in $1 have the package's flags? Prints the keys that differ, one a line.
tree_differs() {
  local cache=$1/CMakeCache.txt flag key want have
  for flag in "${package_flags[@]#-D}" VLESSBENCH_SANITIZE= VLESSBENCH_FUZZ=OFF CMAKE_CXX_FLAGS= CMAKE_TOOLCHAIN_FILE=; do
    key=${flag%%=*} want=${flag#*=}
    have=$(sed -n "s/^$key:[A-Z]*=//p" "$cache")
    [[ $have == "$want" ]] || echo "$key=${have:-(unset)} (the package's: ${want:-(unset)})"
  done
}

if [[ $arch != "$native" ]]; then
  build=$src/build-$arch
  if [[ -n ${VLESSBENCH_PACKAGE_BUILD:-} ]]; then
    echo "VLESSBENCH_PACKAGE_BUILD ignored for --arch $arch: it builds in $build" >&2
  fi
  for tool in "$multiarch-g++" "$multiarch-pkg-config"; do
    command -v "$tool" >/dev/null || { echo "$tool missing: tools/deps.sh --arch $arch installs the cross toolchain" >&2; exit 1; }
  done
  cmake --preset "$arch" "${package_flags[@]}" -DVLESSBENCH_RUNNER_OPENSSL=OFF >/dev/null
elif [[ -n ${VLESSBENCH_PACKAGE_BUILD:-} ]]; then
  build=$(cd "$VLESSBENCH_PACKAGE_BUILD" && pwd)
  cmake -S . -B "$build" "${package_flags[@]}" >/dev/null
elif [[ -f $src/build/CMakeCache.txt && -z $(tree_differs "$src/build") ]]; then
  build=$src/build
  echo "packaging build/ (configured with tools/package-flags.sh): building vlessbenchd and vlessbench there" >&2
else
  if [[ -f $src/build/CMakeCache.txt ]]; then
    echo "build/ not reused: its flags are not the package's (configure it with tools/package-flags.sh, as tools/test.sh does, to reuse it):" >&2
    tree_differs "$src/build" | sed 's/^/  /' >&2
  fi
  build=$out/build
  cmake -S . -B "$build" -G Ninja "${package_flags[@]}" -DVLESSBENCH_TESTS=OFF -DVLESSBENCH_RUNNER_OPENSSL=OFF >/dev/null
fi
cmake --build "$build" -j "$jobs" --target vlessbenchd vlessbench

rm -rf "$stage"
DESTDIR=$stage cmake --install "$build" --strip >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
doc=$stage/usr/share/doc/vlessbench
install -m 0644 packaging/deb/copyright "$doc/copyright"
# The overrides name the RUNPATH of this architecture's BoringSSL directory.
install -d "$stage/usr/share/lintian/overrides"
sed "s|@MULTIARCH@|$multiarch|g" packaging/deb/lintian-overrides > "$stage/usr/share/lintian/overrides/vlessbench"
chmod 0644 "$stage/usr/share/lintian/overrides/vlessbench"
printf 'vlessbench (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' "$version" "$version" \
  "$(sed -n 's/^Maintainer: //p' packaging/deb/control.in)" \
  "$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")" | gzip -9n > "$doc/changelog.gz"

# dpkg-shlibdeps wants a debian/control to read; it only needs the source stanza.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/debian"
printf 'Source: vlessbench\n\nPackage: vlessbench\nArchitecture: any\n' > "$tmp/debian/control"
# (It warns that the binaries are not under debian/PACKAGE: a debhelper layout we do not use.)
# For another architecture dpkg-architecture sets DEB_HOST_ARCH and the multiarch paths: the
# libraries are looked up in /usr/lib/$multiarch and their shlibs in the :$arch packages.
depends=$(cd "$tmp" && CC=$multiarch-gcc dpkg-architecture -a "$arch" -c dpkg-shlibdeps -O "$stage/usr/bin/vlessbenchd" "$stage/usr/bin/vlessbench" \
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
if ((lintian)); then
  command -v lintian >/dev/null || { echo "lintian missing: apt-get install lintian" >&2; exit 1; }
  # Each remaining tag is overridden with its reason in packaging/deb/lintian-overrides.
  lintian --fail-on error,warning "$deb" >&2
fi
