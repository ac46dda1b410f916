#include "core/net/tcp_info.hpp"

#ifdef __linux__
#include <linux/tcp.h>  // the kernel's struct tcp_info: glibc's lacks the newer fields
#include <netinet/in.h>
#include <sys/socket.h>
#endif

namespace vlessbench {

std::optional<tcp_info_snapshot> read_tcp_info(int fd) {
#ifdef __linux__
  struct tcp_info info {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  tcp_info_snapshot s;
  s.rtt_us = info.tcpi_rtt;
  s.rttvar_us = info.tcpi_rttvar;
  s.ato_us = info.tcpi_ato;
  s.retransmits = info.tcpi_total_retrans;
  s.unacked = info.tcpi_unacked;
  if (len >= offsetof(struct tcp_info, tcpi_min_rtt) + sizeof info.tcpi_min_rtt) s.min_rtt_us = info.tcpi_min_rtt;
  if (len >= offsetof(struct tcp_info, tcpi_delivery_rate) + sizeof info.tcpi_delivery_rate)
    s.delivery_rate = info.tcpi_delivery_rate;
  return s;
#else
  (void)fd;
  return std::nullopt;
#endif
}

std::optional<std::uint64_t> read_bytes_acked(int fd) {
#ifdef __linux__
  struct tcp_info info {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  if (len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked) return std::nullopt;
  return info.tcpi_bytes_acked;
#else
  (void)fd;
  return std::nullopt;
#endif
}

}  // namespace vlessbench
