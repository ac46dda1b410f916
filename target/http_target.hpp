#pragma once
// The HTTP target's connections (HTTP/1.1, keep-alive, pipelining-safe), plain or over TLS.
#include <memory>

#include "core/net/asio_compat.hpp"
#include "core/runtime/listener_runtime.hpp"
#include "core/runtime/pending_set.hpp"
#include "target/target_context.hpp"

namespace vlessbench::target {

// Serves one accepted connection until the peer closes, an error, a deadline or a drain. peer is
// the address accept() returned (still known after a reset, unlike the socket's remote endpoint);
// pending: its place in the pending set, left when the first request head is complete. tls: a
// `[[target]] tls = true` listener's server context (the daemon's [tls] certificate): the same
// endpoints behind a TLS handshake bounded by [limits] handshake_timeout; TLS garbage or a timeout
// is a target.reject line. nullptr: plain HTTP.
awaitable<void> serve_connection(target_context& ctx, std::shared_ptr<listener_runtime> listener, tcp::socket socket,
                                 tcp::endpoint peer_ep, pending_set::ticket pending = {},
                                 std::shared_ptr<asio::ssl::context> tls = nullptr);

}  // namespace vlessbench::target
