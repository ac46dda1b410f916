#pragma once
// One measurement and what the server said about it (its X-Vlessbench-Route and Server-Timing
// response headers, read with core/wire/route_header.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runner/path_spec.hpp"
#include "core/wire/route_header.hpp"

namespace vlessbench::runner {

enum class sample_mode { new_connection, reuse };
std::string_view to_string(sample_mode m);  // "new", "reuse"

// The route and phase headers' types and parsers are core's (core/wire/route_header.hpp): the daemon
// writes with the same definitions.
using vlessbench::route_kind;
using vlessbench::route_label;
using vlessbench::server_phases_ms;

struct sample {
  int round = 0;
  std::string path;
  sample_mode mode = sample_mode::new_connection;
  std::uint64_t seq = 0;
  std::int64_t ns = 0;  // elapsed until the response was read, or until the failure
  bool ok = false;
  std::string error;  // why not ok: "connect: Connection refused", "status 502", ...
  int status = 0;     // HTTP status when a response head arrived
  route_label route;
  server_phases_ms timing;
  bool route_mismatch = false;
  // https:// targets, new connections: the TLS handshake with the target inside the tunnel (part
  // of ns, reported as its own phase); -1 when there was none.
  std::int64_t inner_tls_ns = -1;
  std::uint64_t bytes = 0;  // bulk samples: body bytes moved (down: response, up: request)
  // udp:// and dns:// samples of a direct path: the runner's own UDP address ("127.0.0.1:40006"),
  // the peer the target logs, so `verify` finds the sample's flow exactly.
  std::string flow;
  // New-connection samples on a connection of the runner's own to the path's server (direct,
  // tcp://, tls://, vless:// without mux): the path's round-trip time as the kernel measured it on
  // that connection (TCP_INFO min_rtt), ms; the x of the round-trip fit (runner/fit.hpp).
  std::optional<double> rtt_ms;
  // xhttp over h2: the sample's XHTTP session rode an HTTP/2 connection that carried sessions
  // before it (a reused sample: Xray's XMUX), so it paid no TCP or TLS handshake.
  bool shared_h2 = false;

  double ms() const { return static_cast<double>(ns) / 1e6; }
  // Bulk throughput in MB/s (10^6 bytes per second); 0 when not a bulk sample or no time passed.
  double mbps() const { return bytes > 0 && ns > 0 ? static_cast<double>(bytes) * 1e3 / static_cast<double>(ns) : 0; }
};

// A proxy path answered by a direct request bypassed the proxy; a direct request that arrived
// through VLESS was captured (e.g. by a TUN-mode client). Unknown routes prove nothing either way.
bool is_route_mismatch(path_kind kind, route_kind route);

}  // namespace vlessbench::runner
