#pragma once
// vless:// share links (the v2rayN / Shadowrocket import format):
//   vless://UUID@HOST:PORT?encryption=none&security=tls&sni=NAME&allowInsecure=1&type=tcp#NAME
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.hpp"

namespace vlessbench {

struct share_link {
  uuid_bytes uuid{};
  std::string host;         // without brackets for IPv6
  std::uint16_t port = 0;
  std::string security = "tls";  // only "tls" is supported by our clients
  std::string sni;               // empty: none
  bool allow_insecure = false;
  std::string flow;              // must be empty for our clients
  std::string type = "tcp";
  std::string name;              // fragment, percent-decoded
};

// Returns nullopt and sets reason on any malformation (bad uuid, port, scheme, unsupported type...).
std::optional<share_link> parse_share_link(std::string_view text, std::string& reason);
std::string format_share_link(const share_link& link);

}  // namespace vlessbench
