#pragma once
// The one upstream dialer: every connection the daemon opens towards a destination on a client's
// behalf goes through here, for whole VLESS sessions (TCP and UDP, server/vless_session.hpp) and
// Mux.Cool/XUDP sub-connections alike (server/mux_session.hpp). It is where the proof the product
// sells is kept: the destination's addresses are looked up, every one checked against
// [destinations] (server/destination_policy.hpp) before any connect, the socket connected
// with the listener's upstream policy, and its identity registered in the route registry before a
// byte is sent, so a target names the session (or sub) that reached it. A connect() takes only
// what resolve() returned, so no caller can skip the policy. Callers keep what is theirs: their
// budget slots, deadlines, phases and how a failure is logged (vless.reject or vless.sub).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/net/asio_compat.hpp"
#include "core/net/socket_policy.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/wire/destination.hpp"
#include "server/runtime.hpp"

namespace vlessbench::vless_server::detail {

// Why a dial did not give a connected, registered socket.
struct dial_failure {
  enum class step {
    resolve,  // the name lookup failed (or was cancelled): "resolve_failed"
    policy,   // an address is not allowed: "dest_not_allowed", "dest_is_vless_listener"
    connect,  // no address took the connection, or the caller stopped it: "connect_failed"
    route,    // the connection's endpoints or its registration: "connect_failed", "route_conflict"
  };
  step at = step::connect;
  std::string_view reason;
  std::string detail;
};

// A destination's addresses, every one allowed by [destinations]; made only by
// upstream_dialer::resolve.
class allowed_endpoints {
 public:
  const std::vector<asio::ip::tcp::endpoint>& endpoints() const { return list_; }

 private:
  friend class upstream_dialer;
  allowed_endpoints() = default;
  std::vector<asio::ip::tcp::endpoint> list_;
};

// A value or the failure; ok() says which.
template <class T>
struct dial_result {
  std::optional<T> value;
  dial_failure failure;
  bool ok() const { return value.has_value(); }
};

class upstream_dialer {
 public:
  upstream_dialer(runtime& rt, const asio::any_io_executor& ex) : rt_(rt), resolver_(ex) {}

  // The destination's addresses (a name looked up asynchronously), each allowed by [destinations]
  // as the config current after the lookup says; d.net says which protocol's listeners it reaches.
  awaitable<dial_result<allowed_endpoints>> resolve(const destination& d);

  // Connects sock to the first address that takes it, with the upstream policy applied before the
  // connect and again after it (TCP_QUICKACK does not survive the handshake), and registers it
  // under info. stopped() is asked after each attempt: true ends the dial (step::connect).
  // applied: the policy the connection was opened with.
  awaitable<std::optional<dial_failure>> connect(asio::ip::tcp::socket& sock, const allowed_endpoints& to,
                                                 const shared_tcp_policy& policy, tcp_policy& applied,
                                                 std::shared_ptr<const route_info> info,
                                                 std::optional<route_registration>& reg,
                                                 const std::function<bool()>& stopped);

  // A non-blocking UDP socket connected (connect() only sets the peer) to the first address that
  // takes it, registered under info; remote: the peer as the kernel has it.
  std::optional<dial_failure> connect(asio::ip::udp::socket& sock, const allowed_endpoints& to,
                                      std::shared_ptr<const route_info> info, std::optional<route_registration>& reg,
                                      asio::ip::udp::endpoint& remote);

  // Ends a lookup in progress (a lookup is no socket: closing the caller's sockets does not end it).
  void cancel() { resolver_.cancel(); }

 private:
  std::optional<dial_failure> register_route(const flow_id& id, std::shared_ptr<const route_info> info,
                                             std::optional<route_registration>& reg);

  runtime& rt_;
  asio::ip::tcp::resolver resolver_;
};

}  // namespace vlessbench::vless_server::detail
