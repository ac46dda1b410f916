#pragma once
// VLESS+TLS sessions: one coroutine per accepted connection owns both of its sockets.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <string_view>

#include "core/net/asio_compat.hpp"
#include "server/runtime.hpp"

namespace vlessbench::vless_server {

// Why a session ended; recorded in the vless.session / vless.reject log lines.
enum class close_reason {
  client_eof,            // the client closed first (its side done, upstream drained)
  upstream_eof,          // the destination closed first
  client_error,          // reset or I/O error on the client side
  upstream_error,        // reset or I/O error on the upstream side
  timeout,               // a phase deadline passed (which one: the phase field)
  rejected,              // header refused (the reason field says why)
  drain,                 // ended by a SIGTERM drain: at its start (no request yet), by the destination
                         // closing during it (our target closes idle connections), or at its deadline
  user_removed,          // a reload removed the session's user
  slow_transfer,         // a peer did not take what was written to it at [limits] min_rate_*
  udp_packet_too_large,  // command 2: a packet's length prefix over the largest datagram
  udp_truncated_packet,  // command 2: the client's stream ended inside a packet
  mux_error,             // command 3: a frame the Mux.Cool framing does not allow (mux_error says which)
};
std::string_view to_string(close_reason r);

// Counts an authorised VLESS session (against max_sessions) from its admission to the end of its
// coroutine frame, however that ends. Taken with a compare-and-swap, so that max_sessions holds
// while sessions on several threads are admitted at once.
class session_count {
 public:
  // Empty when max sessions are open already.
  static std::optional<session_count> try_acquire(std::atomic<std::size_t>& n, std::size_t max) {
    auto cur = n.load();
    while (cur < max)
      if (n.compare_exchange_weak(cur, cur + 1)) return session_count(n);
    return std::nullopt;
  }
  session_count(session_count&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  session_count& operator=(session_count&&) = delete;
  session_count(const session_count&) = delete;
  session_count& operator=(const session_count&) = delete;
  ~session_count() {
    if (n_ != nullptr) --*n_;
  }

 private:
  explicit session_count(std::atomic<std::size_t>& n) : n_(&n) {}
  std::atomic<std::size_t>* n_;
};

// What a session takes from the main thread when it is accepted: it may run on another thread,
// so it reads neither rt.cfg nor the listener's name again (a reload changes those). The
// listener's policies are atomic and still read at every read.
struct listener_snapshot {
  std::shared_ptr<listener_runtime> listener;
  std::shared_ptr<asio::ssl::context> tls;  // keeps the context alive across a reload
  std::shared_ptr<const config> cfg;
  std::string listener_name;
  transport_spec transport;  // the listener's at accept (a reload applies to later connections)
  tcp_policy policy;         // the listener's, with the generation they belong to
  tcp_policy upstream_policy;
  std::uint64_t generation = 0;
  path_emulation emulate;  // the listener's at accept (its log line names it)

  // The listener as it is now, with the TLS context and config its connections run under.
  static listener_snapshot of(std::shared_ptr<listener_runtime> l, std::shared_ptr<asio::ssl::context> tls,
                              std::shared_ptr<const config> cfg);
};

// A session's start: its listener's snapshot (a gRPC connection's streams share their connection's)
// and what is its own.
struct session_start : listener_snapshot {
  std::uint64_t session_id = 0;
  tcp::endpoint client;         // from accept: the socket's peer is gone once the client resets
  pending_set::ticket pending;  // until the header is authorised
  // The client connection's budget (server/client_budget.hpp), shared by a gRPC connection's
  // streams; empty: the session takes one of its own for its client's address.
  std::shared_ptr<connection_budget> budget;
  // The session's clock starts here: at accept, or at a stream's start; an XHTTP session's at its
  // first request, which may have come before the request that let it start.
  std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
};

// Serves one accepted connection on the socket's executor: TLS handshake, VLESS header, upstream
// connect, relay, one log line at close. Never throws for I/O outcomes.
awaitable<void> serve_session(runtime& rt, session_start start, tcp::socket socket);

}  // namespace vlessbench::vless_server
