#pragma once
// One measurement and what the server said about it, plus the pure parsers for the daemon's
// X-Vlessbench-Route and Server-Timing response headers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "path_spec.hpp"

namespace vlessbench::runner {

enum class sample_mode { new_connection, reuse };
std::string_view to_string(sample_mode m);  // "new", "reuse"

enum class route_kind { unknown, direct, vless };
std::string_view to_string(route_kind r);

struct route_info {
  route_kind kind = route_kind::unknown;
  std::optional<std::uint64_t> session;
  std::string user;
};
// `direct` or `vless session=ID user=NAME`; anything else (or an absent header) is unknown.
route_info parse_route(std::string_view header_value);

// Server-Timing phases of a VLESS session, in ms; absent when the header lacks them.
struct server_timing {
  std::optional<double> tls;       // accept -> TLS handshake done
  std::optional<double> vless;     // TLS done -> VLESS header complete (the stall shows here)
  std::optional<double> resolve;   // domain destinations only
  std::optional<double> upstream;  // header complete -> upstream connected
};
// W3C Server-Timing: `name;dur=1.234, name2;desc="x";dur=2`. Unknown metrics are ignored.
server_timing parse_server_timing(std::string_view header_value);

struct sample {
  int round = 0;
  std::string path;
  sample_mode mode = sample_mode::new_connection;
  std::uint64_t seq = 0;
  std::int64_t ns = 0;  // elapsed until the response was read, or until the failure
  bool ok = false;
  std::string error;    // why not ok: "connect: Connection refused", "status 502", ...
  int status = 0;       // HTTP status when a response head arrived
  route_info route;
  server_timing timing;
  bool route_mismatch = false;

  double ms() const { return static_cast<double>(ns) / 1e6; }
};

// A proxy path answered by a direct request bypassed the proxy; a direct request that arrived
// through VLESS was captured (e.g. by a TUN-mode client). Unknown routes prove nothing either way.
bool is_route_mismatch(path_kind kind, route_kind route);

}  // namespace vlessbench::runner

