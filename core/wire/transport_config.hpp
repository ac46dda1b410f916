#pragma once
// A VLESS listener's transport (docs/config.md "Transports"): what carries the VLESS stream
// between the client and the daemon. config.cpp reads the TOML keys of a [[vless]] table into
// transport_keys; validate_transport checks them and fills transport_config, so the rules of every
// transport live here and not in the general config reader.
//   transport = "tls" (default) | "ws" | "httpupgrade" | "grpc"
//   tls = true        ws/httpupgrade/grpc only: false serves them over plain TCP (a CDN or reverse
//                     proxy in front terminates TLS; grpc is then h2c with prior knowledge)
//   path = "/"        ws/httpupgrade: the request path (a query string is ignored)
//   host = ""         ws/httpupgrade: required Host (empty: any)
//   max_early_data = 0        ws: bytes of the VLESS stream the upgrade request may carry
//   early_data_header = ""    ws: the header carrying them (empty: Sec-WebSocket-Protocol)
//   service_name = "vlessbench"  grpc: requests go to POST /<service_name>/Tun (or /TunMulti)
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vlessbench {

enum class transport_kind { tls, ws, httpupgrade, grpc };
std::string_view to_string(transport_kind k);  // "tls", "ws", "httpupgrade", "grpc"

struct transport_config {
  transport_kind kind = transport_kind::tls;
  bool tls = true;
  std::string path = "/";
  std::string host;
  std::uint32_t max_early_data = 0;
  std::string early_data_header;
  std::string service_name = std::string(default_service_name);
  static constexpr std::string_view default_service_name = "vlessbench";
  // ws frames a client may send: larger ones close the connection (close code 1009).
  static constexpr std::uint64_t max_frame = 1u << 20;
  static constexpr std::uint32_t max_early_data_limit = 8192;  // bytes: the head stays < 16 KiB
  bool operator==(const transport_config&) const = default;
};

// A transport as the reload line names it: "tls", "ws path=/ws host=h early_data=2048
// early_data_header=X plain", "httpupgrade path=/hu", "grpc service=vlessbench" (only what is set;
// "plain" when tls = false).
std::string describe(const transport_config& t);

// The keys as found (absent: nullopt).
struct transport_keys {
  std::optional<std::string> transport;
  std::optional<bool> tls;
  std::optional<std::string> path;
  std::optional<std::string> host;
  std::optional<std::int64_t> max_early_data;
  std::optional<std::string> early_data_header;
  std::optional<std::string> service_name;
};

// Fills out; returns (key, message) for each problem.
std::vector<std::pair<std::string, std::string>> validate_transport(const transport_keys& keys,
                                                                    transport_config& out);

}  // namespace vlessbench
