#pragma once
// What the daemon does to a TCP socket (a listener's tcp / upstream_tcp policy): a plain value the
// config reads and core/net/socket_policy applies.
#include <string_view>

namespace vlessbench {

enum class quickack_mode { kernel, on, off };
std::string_view to_string(quickack_mode m);

// What the daemon does to a TCP socket: after accept/connect and (quickack) after every read.
struct tcp_policy {
  bool nodelay = true;
  quickack_mode quickack = quickack_mode::kernel;
  bool operator==(const tcp_policy&) const = default;
};

}  // namespace vlessbench
