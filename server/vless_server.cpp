#include "server/vless_server.hpp"

#include "core/policy_stream.hpp"
#include "server/transport/tls_stream.hpp"
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
  }
  return "unknown";
}

// The listener's transport picks the session's (raw TLS is the only one yet).
awaitable<void> serve_session(runtime& rt, session_start start, tcp::socket socket) {
  return detail::serve<tls_stream>(rt, std::move(start), std::move(socket),
                                   [](listener_runtime& l, asio::ssl::context& tls, tcp::socket s) {
                                     return tls_stream(policy_stream(std::move(s), &l.tcp), tls);
                                   });
}

}  // namespace vlessbench::vless_server
