# Every dependency is a Debian 12 package; a missing one is a configure error naming the package.
set(VLESSBENCH_APT_PACKAGES "libasio-dev android-libboringssl-dev libspdlog-dev libtomlplusplus-dev catch2 libcli11-dev nlohmann-json3-dev libsystemd-dev libqrencode-dev libnghttp2-dev")

function(vlessbench_require what found package)
  if(NOT ${found})
    message(FATAL_ERROR "${what} not found: install the Debian package '${package}' "
      "(apt-get install ${VLESSBENCH_APT_PACKAGES})")
  endif()
endfunction()

find_path(ASIO_INCLUDE asio.hpp)
vlessbench_require("Standalone Asio" ASIO_INCLUDE libasio-dev)
add_library(asio::asio INTERFACE IMPORTED)
set_target_properties(asio::asio PROPERTIES INTERFACE_COMPILE_DEFINITIONS "ASIO_NO_DEPRECATED;ASIO_STANDALONE")
# Asio 1.22 looks for clang's pre-standard <experimental/coroutine>; with libstdc++'s <coroutine>
# (clang 14 supports it) we tell it so.
target_compile_definitions(asio::asio INTERFACE
  $<$<CXX_COMPILER_ID:Clang>:ASIO_HAS_CO_AWAIT=1>
  $<$<CXX_COMPILER_ID:Clang>:ASIO_HAS_STD_COROUTINE=1>)
find_package(Threads REQUIRED)
target_link_libraries(asio::asio INTERFACE Threads::Threads)
find_package(CLI11 QUIET)
vlessbench_require("CLI11" CLI11_FOUND libcli11-dev)
find_package(nlohmann_json QUIET)
vlessbench_require("nlohmann-json" nlohmann_json_FOUND nlohmann-json3-dev)

# HTTP/2 for the gRPC transport (issue 13): the daemon's listener and the one VLESS client, so
# the runner-only build needs it too.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(NGHTTP2 QUIET IMPORTED_TARGET libnghttp2)
endif()
vlessbench_require("libnghttp2" NGHTTP2_FOUND "libnghttp2-dev (Homebrew: libnghttp2)")

if(VLESSBENCH_RUNNER_OPENSSL OR VLESSBENCH_RUNNER_ONLY)
  find_package(OpenSSL 3 QUIET)
  vlessbench_require("OpenSSL 3" OPENSSL_FOUND "libssl-dev (Homebrew: openssl@3, with -DOPENSSL_ROOT_DIR=...)")
endif()
if(VLESSBENCH_RUNNER_ONLY)
  return()
endif()

# BoringSSL from android-libboringssl-dev: its headers must win over any system OpenSSL ones.
set(VLESSBENCH_BORINGSSL_INCLUDE /usr/include/android CACHE PATH "BoringSSL headers")
set(VLESSBENCH_BORINGSSL_LIBDIR /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/android CACHE PATH "BoringSSL libraries")
# Cross builds (cmake/aarch64-linux-gnu.cmake) link the :arm64 runtime package's libssl.so.0 by its
# soname: android-libboringssl-dev is Multi-Arch: foreign, so its :arm64 copy would replace the
# build machine's; its headers are the same for every architecture, and the amd64 -dev's serve.
find_library(BORINGSSL_SSL NAMES ssl libssl.so.0 PATHS ${VLESSBENCH_BORINGSSL_LIBDIR} NO_DEFAULT_PATH)
find_library(BORINGSSL_CRYPTO NAMES crypto libcrypto.so.0 PATHS ${VLESSBENCH_BORINGSSL_LIBDIR} NO_DEFAULT_PATH)
if(NOT EXISTS ${VLESSBENCH_BORINGSSL_INCLUDE}/openssl/base.h)
  vlessbench_require("BoringSSL headers (${VLESSBENCH_BORINGSSL_INCLUDE})" FALSE android-libboringssl-dev)
elseif(NOT BORINGSSL_SSL OR NOT BORINGSSL_CRYPTO)
  if(CMAKE_CROSSCOMPILING)
    vlessbench_require("BoringSSL for ${CMAKE_LIBRARY_ARCHITECTURE} (${VLESSBENCH_BORINGSSL_LIBDIR})" FALSE
      "android-libboringssl:<arch> (tools/deps.sh --arch <arch>)")
  endif()
  vlessbench_require("BoringSSL (${VLESSBENCH_BORINGSSL_LIBDIR})" FALSE android-libboringssl-dev)
endif()
add_library(boringssl::crypto SHARED IMPORTED)
set_target_properties(boringssl::crypto PROPERTIES IMPORTED_LOCATION ${BORINGSSL_CRYPTO}
  INTERFACE_INCLUDE_DIRECTORIES ${VLESSBENCH_BORINGSSL_INCLUDE})
add_library(boringssl::ssl SHARED IMPORTED)
set_target_properties(boringssl::ssl PROPERTIES IMPORTED_LOCATION ${BORINGSSL_SSL}
  INTERFACE_INCLUDE_DIRECTORIES ${VLESSBENCH_BORINGSSL_INCLUDE}
  INTERFACE_LINK_LIBRARIES boringssl::crypto)
# The android libraries are not on the loader path: our binaries carry an RPATH to them.
set(CMAKE_BUILD_RPATH ${VLESSBENCH_BORINGSSL_LIBDIR})
set(CMAKE_INSTALL_RPATH ${VLESSBENCH_BORINGSSL_LIBDIR})

find_package(spdlog QUIET)
vlessbench_require("spdlog" spdlog_FOUND libspdlog-dev)
find_package(tomlplusplus QUIET)
vlessbench_require("toml++" tomlplusplus_FOUND libtomlplusplus-dev)
if(PkgConfig_FOUND)
  pkg_check_modules(SYSTEMD QUIET IMPORTED_TARGET libsystemd)
  pkg_check_modules(QRENCODE QUIET IMPORTED_TARGET libqrencode)
  # Path emulation (emulate = {...}): netem set through rtnetlink, server/netem.cpp.
  pkg_check_modules(NLROUTE QUIET IMPORTED_TARGET libnl-route-3.0)
endif()
vlessbench_require("libsystemd" SYSTEMD_FOUND libsystemd-dev)
vlessbench_require("libqrencode" QRENCODE_FOUND libqrencode-dev)
vlessbench_require("libnl-route-3" NLROUTE_FOUND "libnl-3-dev libnl-route-3-dev")

if(VLESSBENCH_TESTS)
  find_package(Catch2 QUIET)
  vlessbench_require("Catch2 v2" Catch2_FOUND catch2)
endif()
