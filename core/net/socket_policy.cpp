#include "core/net/socket_policy.hpp"

#include <cerrno>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace vlessbench {

std::string_view to_string(quickack_mode m) {
  switch (m) {
    case quickack_mode::kernel: return "kernel";
    case quickack_mode::on: return "on";
    case quickack_mode::off: return "off";
  }
  return "kernel";
}

namespace {

std::error_code set_int(int fd, int level, int name, int value) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) return {errno, std::system_category()};
  return {};
}

}  // namespace

std::error_code apply_on_open(int fd, const tcp_policy& p) {
  std::error_code first = set_int(fd, IPPROTO_TCP, TCP_NODELAY, p.nodelay ? 1 : 0);
#ifdef TCP_QUICKACK
  if (p.quickack != quickack_mode::kernel) {
    auto ec = set_int(fd, IPPROTO_TCP, TCP_QUICKACK, p.quickack == quickack_mode::on ? 1 : 0);
    if (!first) first = ec;
  }
#endif
  return first;
}

void apply_after_read(int fd, const tcp_policy& p) {
#ifdef TCP_QUICKACK
  // The kernel drops quickack mode again on its own (tcp(7)), so "on" must be re-armed after
  // every read, and "off" re-asserted, for the setting to hold for the whole connection.
  if (p.quickack != quickack_mode::kernel)
    (void)set_int(fd, IPPROTO_TCP, TCP_QUICKACK, p.quickack == quickack_mode::on ? 1 : 0);
#else
  (void)fd;
  (void)p;
#endif
}

}  // namespace vlessbench
