#pragma once
// VLESS+TLS sessions: one coroutine per accepted connection owns both of its sockets.
#include <memory>
#include <string_view>

#include "asio_compat.hpp"
#include "runtime.hpp"

namespace vlessbench::vless_server {

// Why a session ended; recorded in the vless.session / vless.reject log lines.
enum class close_reason {
  client_eof,      // the client closed first (its side done, upstream drained)
  upstream_eof,    // the destination closed first
  client_error,    // reset or I/O error on the client side
  upstream_error,  // reset or I/O error on the upstream side
  timeout,         // a phase deadline passed (which one: the phase field)
  rejected,        // header refused (the reason field says why)
  drain,           // closed by a SIGTERM drain deadline
};
std::string_view to_string(close_reason r);

// Serves one accepted connection: TLS handshake, VLESS header, upstream connect, relay, one log
// line at close. Never throws for I/O outcomes.
awaitable<void> serve_session(runtime& rt, std::shared_ptr<listener_runtime> listener,
                              std::shared_ptr<asio::ssl::context> tls, tcp::socket socket);

}  // namespace vlessbench::vless_server
