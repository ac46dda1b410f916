# Sourced by tools/package.sh and tools/test.sh: how a tree is configured for the Debian package.
# Debian's layout: binaries in /usr/bin, config in /etc, the unit in /lib/systemd/system (bookworm
# packages still ship units there), no config written at install (the postinst does it, on the
# VM). Compiled exactly as the measured Release tree; linked with full RELRO (lintian's bindnow),
# which costs nothing after start.
package_flags=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc
               -DVLESSBENCH_SYSTEMD_UNIT_DIR=/lib/systemd/system -DVLESSBENCH_INSTALL_CONFIG=OFF
               "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,relro -Wl,-z,now")
