#pragma once
// A sub-connection as the sub-connection engine (server/sub_engine.hpp) keeps it, whatever its
// framing (Mux.Cool, sing-mux): its queue towards the destination, its sockets (TCP, or one UDP
// flow per destination) and its counters; and the engine's bounds (the window its header comment
// explains). No template: nothing here depends on the session or its transport.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/net/watchdog.hpp"
#include "server/client_budget.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/wire/mux_frame.hpp"
#include "core/wire/session_info.hpp"
#include "server/upstream_dialer.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

constexpr std::size_t mux_sub_queue_limit = 1u << 20;      // TCP: client data its destination has not taken
constexpr auto mux_stall_limit = std::chrono::seconds(2);  // the longest pause of the client's stream for one
constexpr std::size_t mux_udp_queue_limit = 256u << 10;    // UDP: datagrams waiting; past it dropped
constexpr std::size_t mux_down_limit = 1u << 20;           // frames waiting for the client
constexpr std::size_t mux_udp_flows = 8;                   // destinations of one UDP sub-connection
constexpr std::size_t mux_logged_refusals = 16;            // vless.sub lines for refused/stray frames
constexpr std::size_t mux_frame_data = 0xffff;             // the most one frame carries

struct mux_packet {
  std::string data;
  std::optional<mux::target> to;  // XUDP: the datagram's own destination
};
struct mux_udp_flow {
  explicit mux_udp_flow(const asio::any_io_executor& ex) : sock(ex) {}
  std::string key;  // the target as mux::format_target spells it
  asio::ip::udp::endpoint to;
  asio::ip::udp::socket sock;
  std::optional<route_registration> reg;
  std::optional<connection_budget::upstream_slot> slot;  // a destination after the sub's first
};
struct mux_sub_conn : std::enable_shared_from_this<mux_sub_conn> {
  mux_sub_conn(runtime& rt, const asio::any_io_executor& ex)
      : tcp_sock(ex), wake(ex, steady_clock::time_point::max()), deadline(ex), dialer(rt, ex) {}
  std::uint16_t id = 0;
  std::uint32_t number = 0;
  mux::target target;
  bool xudp = false;
  bool addressed = false;  // the client sent per-packet targets: the replies carry theirs
  std::string dest;
  std::shared_ptr<route_info> info;
  tcp::socket tcp_sock;
  std::optional<route_registration> reg;
  std::optional<connection_budget::upstream_slot> slot;  // its (first) upstream socket's
  std::vector<std::unique_ptr<mux_udp_flow>> flows;
  std::deque<mux_packet> queue;
  std::size_t queued = 0;
  asio::steady_timer wake;      // the writer towards the destination waits here
  asio::steady_timer deadline;  // resolve + connect
  upstream_dialer dialer;
  steady_clock::time_point opened = steady_clock::now();
  steady_clock::time_point last = opened;
  bool connected = false;
  bool full = false;        // queued past mux_sub_queue_limit: the client's stream
                            // waits for it
  bool client_end = false;  // End from the client
  bool closed = false;      // ended: sockets closed, logged
  std::uint64_t bytes_up = 0, bytes_down = 0, packets_up = 0, packets_down = 0, dropped = 0;
  std::optional<std::int64_t> connect_us;
  bool udp() const { return target.net == mux::network::udp; }

  // Its route_info: the session's, naming this sub (its number set), with phases of its own from
  // its New on (now_us: the session's clock), for the target's route header and Server-Timing.
  void name_route(const route_info& session, std::int64_t now_us);
  // Route entries first, then the sockets; the dialer, the timers and the queue towards the
  // destination end with them. The caller gives the queued bytes back to the client's budget.
  void close_sockets();
};

// The vless.sub line of a sub-connection at its close (close_reason and error as the engine's
// finish names them).
void emit_sub_closed(runtime& rt, const route_info& session, std::string_view listener, const mux_sub_conn& c,
                     std::string_view reason, std::string_view error, std::string_view detail);
// The vless.sub line of an open refused (id, its destination when it named one), or of a frame
// for no live sub-connection.
void emit_sub_refused(runtime& rt, const route_info& session, std::string_view listener, std::uint16_t id,
                      const std::optional<destination>& dest, std::string_view why, std::string_view detail);

}  // namespace vlessbench::vless_server::detail
