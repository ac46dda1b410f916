#pragma once
// The daemon's configuration: a plain immutable value, parsed from TOML and validated in one
// place (config.cpp: the schema; core/config/toml_reader: TOML and its errors; core/wire/net_address:
// endpoints and networks). The running daemon holds shared_ptr<const config> and swaps it on reload.
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>

#include "core/net/path_emulation.hpp"
#include "core/net/tcp_policy.hpp"
#include "core/net/tls_options.hpp"
#include "core/wire/uuid.hpp"
#include "core/config/listener_kind.hpp"
#include "core/wire/net_address.hpp"  // endpoints (listeners) and ip_network (destinations)
#include "core/wire/reality.hpp"
#include "core/wire/transport_spec.hpp"

namespace vlessbench {

struct user_config {
  std::string name;
  uuid_bytes uuid{};
  std::string uuid_text;  // canonical lower-case 8-4-4-4-12
};

struct vless_listener_config {
  std::string name;
  asio::ip::tcp::endpoint listen;
  tcp_policy tcp;            // accepted client sockets
  tcp_policy upstream_tcp;   // sockets the daemon dials
  transport_spec transport;  // what carries the VLESS stream (core/wire/transport_spec.hpp)
  // security = "reality": REALITY in place of TLS (core/wire/reality.hpp); private_key all zero
  // until the daemon makes or loads one (reality::settings::key_generated).
  std::optional<reality::settings> reality;
  path_emulation emulate;  // netem on what the host sends from this listener's port
  bool operator==(const vless_listener_config&) const = default;
};

// A [[target]] (HTTP, or HTTPS with tls = true and [tls]'s certificate) or a [[banner]] listener
// (server speaks first, then echoes): the daemon's own destinations (docs/targets.md).
struct target_listener_config {
  std::string name;
  asio::ip::tcp::endpoint listen;
  tcp_policy tcp;
  bool tls = false;
  bool banner = false;
  // GET / from a browser shows the share links and QR codes of every user x [[vless]] listener
  // (they carry the UUIDs: opt-in, target/index_page.hpp); off, a page saying where to get them.
  bool index_links = false;
  // The host those links dial; empty: the one the browser used (its Host header).
  std::string index_host;
  path_emulation emulate;  // netem on what the host sends from this listener's port
  // The listener kind the daemon logs and diffs reloads by.
  listener_kind kind() const {
    return banner ? listener_kind::banner : tls ? listener_kind::https : listener_kind::target;
  }
  bool operator==(const target_listener_config&) const = default;
};

// What a [[udp_target]] answers (docs/target.md): its echo with the route trailer, or as an NTP
// server (mode 4, the daemon's clock) or a STUN server (Binding responses) would, for the UDP
// delay tests clients ship.
enum class udp_mode { echo, ntp, stun };
std::string_view to_string(udp_mode m);

// A [[udp_target]]: echoes each datagram with a trailer naming its route (docs/target.md). Opened at
// start; a reload that changes the list is refused (server/reload_plan.cpp).
struct udp_listener_config {
  std::string name;
  asio::ip::udp::endpoint listen;
  udp_mode mode = udp_mode::echo;
  bool operator==(const udp_listener_config&) const = default;
};

// A [[dns]] responder: UDP and TCP on one port, A/AAAA for every name in zone (docs/target.md).
// Opened at start, as [[udp_target]].
struct dns_listener_config {
  std::string name;
  asio::ip::tcp::endpoint listen;  // the same address and port for UDP and TCP
  std::string zone = "vlessbench.test";
  // Unset: the address the query was sent to, when it is of the family (so the installed
  // config on 0.0.0.0 answers with the VM's address), else 127.0.0.1 / ::1.
  std::optional<asio::ip::address_v4> a;
  std::optional<asio::ip::address_v6> aaaa;
  bool operator==(const dns_listener_config&) const = default;
};

struct log_config {
  std::string level = "info";     // trace|debug|info|warn|error
  std::string access = "stdout";  // "stdout" or a file path (JSON lines)
  // Bytes of access-log lines held while the reader does not keep up; beyond, lines are dropped.
  static constexpr std::size_t min_queue_bytes = 64u << 10, max_queue_bytes = 1u << 30;
  std::size_t queue_bytes = default_queue_bytes;  // core/log/access_log.hpp's default too
  static constexpr std::size_t default_queue_bytes = 4u << 20;
  // Access-log lines a second for the whole daemon (token bucket, burst one second); 0: no bound.
  static constexpr std::uint64_t default_max_lines_per_second = 20000, max_max_lines_per_second = 10000000;
  std::uint64_t max_lines_per_second = default_max_lines_per_second;
  // The same for authenticated VLESS sessions' own lines (their vless.* lines and the answers
  // they relayed), a bucket apart so that no other traffic can drop them.
  std::uint64_t max_session_lines_per_second = default_max_lines_per_second;
};

struct limits_config {
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds idle_timeout{300'000};
  // A VLESS UDP session (command 2) with no datagram either way for this long ends.
  std::chrono::milliseconds udp_idle_timeout{60'000};
  // After the destination's EOF a WebSocket or HTTPUpgrade session waits this long for the client
  // to close first (reading on), as v2ray's and Xray's servers do (their policy's uplinkOnly, 2 s):
  // their ws clients drop an answer they hold when the server's close frame comes first. 0: close
  // at once.
  std::chrono::milliseconds close_linger{2'000};
  std::chrono::milliseconds drain_timeout{5'000};
  std::uint32_t max_sessions = 20'000;  // authorised VLESS sessions
  // Connections not yet admitted (VLESS before its header is authorised, target before its first
  // request head): at most this many (and half the descriptor limit), the oldest closed first.
  std::uint32_t max_pending = 1'024;
  // Mux.Cool (VLESS command 3) sub-connections open at once in one session; a New past it is
  // refused (End with the error option, vless.sub "too_many_subs"). Read per session at admission.
  std::uint32_t max_mux_subs = 64;
  // What one source address (all VLESS listeners) and one client TCP connection may hold
  // (server/client_budget.hpp; docs/configuration.md): authorised sessions per address; upstream
  // connections (a session's, a mux sub's, a UDP destination's socket) per connection, all of a
  // gRPC connection's streams together, and per address; bytes mux sub-connections hold for
  // their destinations, per address. Past one: refused with reason client_budget or
  // too_many_sessions_from_client.
  std::uint32_t max_sessions_per_client = 256;
  std::uint32_t max_upstreams_per_connection = 256;
  std::uint32_t max_upstreams_per_client = 1'024;
  std::uint64_t max_buffered_per_client = 32u << 20;
  // Deadline from accept for the same: VLESS handshake + header, a target's first request head.
  std::chrono::milliseconds pending_timeout{10'000};
  // A transfer in progress (a /sink body, a relay write) must move min_rate_bytes every
  // min_rate_window, else it is closed (slow_transfer); 0 bytes: no rate rule.
  std::uint32_t min_rate_bytes = 1'024;
  std::chrono::milliseconds min_rate_window{10'000};
  // POST /probe/result accepted per minute, all target listeners together (a burst of as many
  // passes); past it 429. 0: the daemon takes no probe results.
  std::uint32_t probe_results_per_minute = 60;
  // DNS response rate limiting ([[dns]] UDP answers to direct, non-loopback sources; target/dns_rrl.hpp):
  // answers per second per /24 (IPv4) or /56 (IPv6) source prefix, a burst of that times the window,
  // and every slip-th limited answer sent truncated (TC) instead of dropped. 0 per second: off.
  std::uint32_t dns_rrl_responses_per_second = 100;
  std::uint32_t dns_rrl_slip = 2;
  std::chrono::milliseconds dns_rrl_window{1'000};
  // io_context threads VLESS sessions are spread over (round robin at accept). 1: everything on
  // one thread, the lowest and steadiest latency; more: handshakes and sessions on every core.
  // Read at start only (a reload that changes it is refused).
  static constexpr unsigned max_threads = 64;
  unsigned threads = 1;
};

// Where VLESS sessions may connect. The daemon's own [[target]] listeners and loopback addresses
// are always allowed; anything else needs a network in allow (so the daemon is no open relay).
struct destinations_config {
  std::vector<ip_network> allow;
  bool operator==(const destinations_config&) const = default;
};

// The admin listener (docs/dashboard.md): dashboard, /api/state and /metrics, read-only. Off when
// listen is empty. A listener off loopback requires a token; it is compared in constant time.
struct admin_config {
  static constexpr std::uint16_t default_port = 9090;
  static constexpr std::size_t min_token = 16, max_token = 256;
  std::optional<asio::ip::tcp::endpoint> listen =
      asio::ip::tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), default_port);
  std::string token;  // empty: none (loopback only)
  // Host header names a request may carry besides the listener's address literal and localhost
  // (DNS rebinding, docs/dashboard.md): lower case, without port or trailing dot.
  std::vector<std::string> hosts;
  static constexpr std::size_t max_hosts = 64;
  // Admission (docs/dashboard.md "Admission"): a connection is pending until its request head is
  // complete and passed the Host and token checks; pending ones are capped with the oldest evicted,
  // so half-sent requests never keep an authenticated scrape out. A reload applies them to new
  // connections.
  std::chrono::milliseconds header_timeout{5000};  // header_timeout_ms: the whole request head
  std::uint32_t max_connections = 256;             // all together, answered ones included
  std::uint32_t max_pending = 32;                  // at most max_connections
  std::uint32_t max_connections_per_client = 8;    // per source address, at most max_connections
  static constexpr std::uint32_t max_max_connections = 65'536;
  bool operator==(const admin_config&) const = default;
};

struct config {
  log_config log;
  tls_config tls;
  std::vector<user_config> users;
  std::vector<vless_listener_config> vless;
  std::vector<target_listener_config> target;
  std::vector<udp_listener_config> udp_target;
  std::vector<dns_listener_config> dns;
  limits_config limits;
  destinations_config destinations;
  admin_config admin;
  std::string source = "<embedded default>";  // file the config came from
};

// All problems found in one file, each "FILE:LINE: KEY: message".
class config_error : public std::runtime_error {
 public:
  explicit config_error(std::vector<std::string> errors);
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

// Parses and validates; throws config_error listing every problem. source_name is used in messages.
config parse_config(std::string_view toml_text, std::string_view source_name);
config load_config_file(const std::filesystem::path& file);
// DESIGN.md §3: two VLESS+TLS listeners (8443 kernel, 8444 quickack on), WebSocket on 8445 (path
// /ws, early data up to 2048 bytes) and HTTPUpgrade on 8446 (path /up), and a target on 8080, all
// on 127.0.0.1, a UDP echo target on 8083, a DNS responder on 8053, one user with a random UUID, in-memory certificate;
// [admin] on 127.0.0.1:9090.
config default_config();

}  // namespace vlessbench
