#pragma once
// A TCP_INFO snapshot: the kernel's own view of a connection (RTT, ACK timeout, retransmits), put
// next to the session timings as evidence of delayed-ACK behaviour.
#include <cstdint>
#include <optional>

namespace vlessbench {

struct tcp_info_snapshot {
  std::uint32_t rtt_us = 0;
  std::uint32_t rttvar_us = 0;
  std::uint32_t min_rtt_us = 0;   // the lowest RTT seen: the path's, without delayed ACKs; 0 unknown
  std::uint32_t ato_us = 0;       // delayed-ACK timeout currently in force
  std::uint32_t retransmits = 0;  // total retransmitted segments
  std::uint32_t unacked = 0;
  std::uint64_t delivery_rate = 0;  // bytes/s
};

std::optional<tcp_info_snapshot> read_tcp_info(int fd);
// Bytes the peer has acknowledged so far (tcpi_bytes_acked); nullopt if the kernel cannot say.
std::optional<std::uint64_t> read_bytes_acked(int fd);

}  // namespace vlessbench
