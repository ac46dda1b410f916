#include "server/vless_server.hpp"

#include "core/policy_stream.hpp"
#include "server/transport/httpupgrade_stream.hpp"
#include "server/transport/plain_stream.hpp"
#include "server/transport/tls_stream.hpp"
#include "server/transport/ws_stream.hpp"
#include "server/vless_session.hpp"

namespace vlessbench::vless_server {

std::string_view to_string(close_reason r) {
  switch (r) {
    case close_reason::client_eof: return "client_eof";
    case close_reason::upstream_eof: return "upstream_eof";
    case close_reason::client_error: return "client_error";
    case close_reason::upstream_error: return "upstream_error";
    case close_reason::timeout: return "timeout";
    case close_reason::rejected: return "rejected";
    case close_reason::drain: return "drain";
    case close_reason::user_removed: return "user_removed";
    case close_reason::slow_transfer: return "slow_transfer";
    case close_reason::udp_packet_too_large: return "udp_packet_too_large";
    case close_reason::udp_truncated_packet: return "udp_truncated_packet";
  }
  return "unknown";
}

namespace {

// The listener's transport as its config at accept says (a reload applies to new connections).
transport_config transport_of(const session_start& start) {
  for (const auto& l : start.cfg->vless)
    if (l.name == start.listener_name) return l.transport;
  return {};
}

// Over TLS or plain TCP: Stream<tls_stream> or Stream<plain_stream>.
template <template <class> class Stream>
awaitable<void> serve_upgraded(runtime& rt, session_start start, tcp::socket socket, transport_config t) {
  if (t.tls) {
    return detail::serve<Stream<tls_stream>>(
        rt, std::move(start), std::move(socket),
        [t = std::move(t)](listener_runtime& l, asio::ssl::context& tls, tcp::socket s) {
          return Stream<tls_stream>(t, policy_stream(std::move(s), &l.tcp), tls);
        });
  }
  return detail::serve<Stream<plain_stream>>(rt, std::move(start), std::move(socket),
                                             [t = std::move(t)](listener_runtime& l, asio::ssl::context&, tcp::socket s) {
                                               return Stream<plain_stream>(t, policy_stream(std::move(s), &l.tcp));
                                             });
}

}  // namespace

// The listener's transport picks the session's.
awaitable<void> serve_session(runtime& rt, session_start start, tcp::socket socket) {
  transport_config t = transport_of(start);
  switch (t.kind) {
    case transport_kind::ws: return serve_upgraded<ws_stream>(rt, std::move(start), std::move(socket), std::move(t));
    case transport_kind::httpupgrade:
      return serve_upgraded<httpupgrade_stream>(rt, std::move(start), std::move(socket), std::move(t));
    case transport_kind::tls: break;
  }
  return detail::serve<tls_stream>(rt, std::move(start), std::move(socket),
                                   [](listener_runtime& l, asio::ssl::context& tls, tcp::socket s) {
                                     return tls_stream(policy_stream(std::move(s), &l.tcp), tls);
                                   });
}

}  // namespace vlessbench::vless_server
