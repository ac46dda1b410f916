#pragma once
// What carries a VLESS stream between a client and the daemon: one value for the three places
// that name a transport (docs/configuration.md "Transports", docs/clients.md):
//   - the daemon's [[vless]] keys: config.cpp reads them into transport_keys, validate_transport
//     checks them and fills a transport_spec, so the rules of every transport live here and not
//     in the general config reader;
//   - the built-in client (core/client/vless_client.hpp: client_plan::transport);
//   - a share link's query (core/wire/share_link.hpp): transport_query / parse_transport_query
//     are its format+parse pair (security=, type=, path=, host=, ed=, serviceName=, mode=).
// The TOML keys, each for the transports named:
//   transport = "tls" (default) | "ws" | "httpupgrade" | "grpc"   (a share link's type=tcp is "tls")
//   tls = true        ws/httpupgrade/grpc only: false serves them over plain TCP (a CDN or reverse
//                     proxy in front terminates TLS; grpc is then h2c with prior knowledge)
//   path = "/"        ws/httpupgrade: the request path (a query string is ignored)
//   host = ""         ws/httpupgrade: required Host (empty: any)
//   max_early_data = 0        ws: bytes of the VLESS stream the upgrade request may carry
//   early_data_header = ""    ws: the header carrying them (empty: Sec-WebSocket-Protocol)
//   service_name = "vlessbench"  grpc: requests go to POST /<service_name>/Tun (or /TunMulti)
//   transport = "xhttp" (core/wire/xhttp_request.hpp) takes path (the prefix, default "/"), host,
//   tls, and:
//   mode = "auto"             auto | packet-up | stream-up | stream-one: the requests served
//   padding_bytes = "100-1000"  the x_padding lengths accepted (and X-Padding's on answers)
//   max_post_bytes = 1000000  packet-up: a POST's body at most
//   max_buffered_posts = 30   packet-up: POSTs held ahead of a gap in the sequence
//   session_timeout_ms = 30000  a session whose GET (or first POST) never comes is dropped then
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wire/xhttp_request.hpp"

namespace vlessbench {

enum class transport_kind { tls, ws, httpupgrade, grpc, xhttp };
std::string_view to_string(transport_kind k);  // "tls", "ws", "httpupgrade", "grpc", "xhttp"
std::string_view link_type(transport_kind k);  // a share link's type=: "tcp", "ws", "httpupgrade", "grpc", "xhttp"

// Fields a transport does not use keep their defaults (validate_transport and
// parse_transport_query leave them so), so == compares what matters.
struct transport_spec {
  transport_kind kind = transport_kind::tls;
  bool tls = true;  // false: plain TCP (ws, httpupgrade and grpc (h2c) only)
  std::string path = "/";
  // The Host header: the daemon requires it (empty: any); the client sends it (empty: the server
  // address as given).
  std::string host;
  std::uint32_t max_early_data = 0;
  std::string early_data_header;  // empty: Sec-WebSocket-Protocol (a share link never names it)
  std::string service_name = std::string(default_service_name);
  bool grpc_multi = false;  // grpc, the client: the TunMulti method (mode=multi); the daemon serves both
  // xhttp: the requests served (the client: the mode it speaks; auto is packet-up), the padding
  // range, the bounds of packet-up's uplink and how long a half-open session waits.
  xhttp::mode xhttp_mode = xhttp::mode::any;
  std::uint32_t padding_min = 100;
  std::uint32_t padding_max = 1000;
  std::uint32_t max_post_bytes = 1'000'000;
  std::uint32_t max_buffered_posts = 30;
  std::uint32_t session_timeout_ms = 30'000;
  // xhttp, the client: the ALPN it offers over TLS ("h2" or "http/1.1"; a link's alpn=).
  std::string alpn;
  static constexpr std::string_view default_service_name = "vlessbench";
  // ws frames a client may send: larger ones close the connection (close code 1009).
  static constexpr std::uint64_t max_frame = 1u << 20;
  static constexpr std::uint32_t max_early_data_limit = 8192;  // bytes: the head stays < 16 KiB
  bool upgrades() const { return kind == transport_kind::ws || kind == transport_kind::httpupgrade; }
  // Takes path= and host= (ws, httpupgrade, xhttp).
  bool has_path() const { return upgrades() || kind == transport_kind::xhttp; }
  bool operator==(const transport_spec&) const = default;
};

// A transport as the reload line names it: "tls", "ws path=/ws host=h early_data=2048
// early_data_header=X plain", "httpupgrade path=/hu", "grpc service=vlessbench" (only what is set;
// "multi" with grpc_multi, "plain" when tls = false).
std::string describe(const transport_spec& t);

// The keys as found (absent: nullopt).
struct transport_keys {
  std::optional<std::string> transport;
  std::optional<bool> tls;
  std::optional<std::string> path;
  std::optional<std::string> host;
  std::optional<std::int64_t> max_early_data;
  std::optional<std::string> early_data_header;
  std::optional<std::string> service_name;
  std::optional<std::string> mode;  // xhttp
  std::optional<std::string> padding_bytes;
  std::optional<std::int64_t> max_post_bytes;
  std::optional<std::int64_t> max_buffered_posts;
  std::optional<std::int64_t> session_timeout_ms;
};

// Fills out; returns (key, message) for each problem.
std::vector<std::pair<std::string, std::string>> validate_transport(const transport_keys& keys, transport_spec& out);

// A share link's query parameters (core/wire/percent.hpp: parse_query, values decoded).
using query_params = std::map<std::string, std::string, std::less<>>;

// The share link's parameters of t, in the order a link prints them, values not yet
// percent-encoded: security= (tls|none) first, then type= (tcp|ws|httpupgrade|grpc) and the
// transport's own: ws/httpupgrade path= (never empty), host= (when set), ws ed= (when > 0);
// grpc serviceName=, mode=multi (with grpc_multi); xhttp path=, host= (when set), mode=, alpn= (when
// set). early_data_header is not a link's: the client
// entries name it (core/wire/client_entries.hpp).
std::vector<std::pair<std::string_view, std::string>> transport_query(const transport_spec& t);

// The transport a link's parameters describe (absent type=: tcp; absent security=: none, which
// raw TCP refuses), or nullopt with reason set. Reads type, headerType (none only), security,
// path (Xray's /ws?ed=2048 read as ed=2048), host, ed (ws only, 0..100000), serviceName (absent
// or empty: "vlessbench"; no '/', '?', '#' or spaces) and mode (gun or multi); other keys are
// the link's. Round trip: a spec it returns, formatted by transport_query, parses back equal.
std::optional<transport_spec> parse_transport_query(const query_params& params, std::string& reason);

}  // namespace vlessbench
