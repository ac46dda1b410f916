# Cross-compiling for arm64 Linux on a Debian amd64 machine (issue 25), Debian's multiarch way:
# the cross compiler from crossbuild-essential-arm64, every library as its :arm64 package
# (tools/deps.sh --arch arm64) in /usr/lib/aarch64-linux-gnu, no sysroot. Used by the arm64 preset
# (build-arm64/) and tools/package.sh --arch arm64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config's cross personality: the .pc files of the :arm64 packages, never the amd64 ones.
set(PKG_CONFIG_EXECUTABLE aarch64-linux-gnu-pkg-config CACHE FILEPATH "pkg-config for arm64")
# Programs (the compiler, strip) from the build machine; libraries and CMake package configs only
# for the target: without a sysroot "/" is the root, and the multiarch directory picks the arch.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Anything CMake runs that was built for the target goes through qemu-user.
find_program(VLESSBENCH_QEMU_AARCH64 qemu-aarch64-static)
if(VLESSBENCH_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${VLESSBENCH_QEMU_AARCH64})
endif()
