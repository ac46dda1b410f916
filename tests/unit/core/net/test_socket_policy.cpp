#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/net/socket_policy.hpp"

using namespace vlessbench;

namespace {

int get_int(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, name, &v, &len) == 0);
  return v;
}

struct tcp_fd {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ~tcp_fd() { ::close(fd); }
};

}  // namespace

TEST_CASE("apply_on_open sets TCP_NODELAY as configured", "[socket_policy]") {
  tcp_fd s;
  REQUIRE(s.fd >= 0);
  REQUIRE(get_int(s.fd, TCP_NODELAY) == 0);  // Linux default: Nagle on

  CHECK_FALSE(apply_on_open(s.fd, tcp_policy{true, quickack_mode::kernel}));
  CHECK(get_int(s.fd, TCP_NODELAY) != 0);

  CHECK_FALSE(apply_on_open(s.fd, tcp_policy{false, quickack_mode::kernel}));
  CHECK(get_int(s.fd, TCP_NODELAY) == 0);
}

TEST_CASE("quickack on/off is set and re-armed after reads, kernel leaves it alone", "[socket_policy]") {
  tcp_fd s;
  REQUIRE(s.fd >= 0);
  CHECK_FALSE(apply_on_open(s.fd, tcp_policy{true, quickack_mode::on}));
  CHECK(get_int(s.fd, TCP_QUICKACK) == 1);

  apply_after_read(s.fd, tcp_policy{true, quickack_mode::off});
  CHECK(get_int(s.fd, TCP_QUICKACK) == 0);

  apply_after_read(s.fd, tcp_policy{true, quickack_mode::on});
  CHECK(get_int(s.fd, TCP_QUICKACK) == 1);

  // "kernel" must not touch the option: whichever value was set last stays. getsockopt reads the
  // socket's current quickack flag (not in pingpong mode), and a new socket starts with it set, so
  // only the cleared flag can tell "leaves it alone" from "sets it": check both ways.
  apply_after_read(s.fd, tcp_policy{true, quickack_mode::kernel});
  CHECK(get_int(s.fd, TCP_QUICKACK) == 1);

  apply_after_read(s.fd, tcp_policy{true, quickack_mode::off});
  REQUIRE(get_int(s.fd, TCP_QUICKACK) == 0);
  apply_after_read(s.fd, tcp_policy{true, quickack_mode::kernel});
  CHECK(get_int(s.fd, TCP_QUICKACK) == 0);
  CHECK_FALSE(apply_on_open(s.fd, tcp_policy{true, quickack_mode::kernel}));
  CHECK(get_int(s.fd, TCP_QUICKACK) == 0);
}

TEST_CASE("a closed descriptor yields an error, not a crash", "[socket_policy]") {
  const auto ec = apply_on_open(-1, tcp_policy{true, quickack_mode::on});
  CHECK(ec);
  CHECK(ec.value() == EBADF);
}
