#pragma once
// The [[banner]] target (docs/targets.md): a server that speaks first, as SSH
// and SMTP servers do. On accept it writes one line naming its listener and the
// connection's route (the route proof, format_banner_line in
// core/wire/route_header.hpp), then echoes whatever the peer sends. A client core
// that holds the VLESS header until the application writes, or that sniffs the
// first bytes, shows up here as a late banner or none at all.
#include <memory>

#include "core/net/asio_compat.hpp"
#include "core/runtime/listener_runtime.hpp"
#include "core/runtime/pending_set.hpp"
#include "target/target_context.hpp"

namespace vlessbench::target {

// Serves one accepted connection until the peer closes, an error, a deadline or
// a drain, then writes one banner.connection line. Memory: one echo buffer of
// 16 KiB, read and written in turn (a peer that sends but never reads fills the
// socket buffers and is then cut by the rate rule: [limits] min_rate_bytes per
// min_rate_window, close_reason "slow_transfer"). A peer that never sends stays
// pending ([limits] pending_timeout) after its banner; once it has sent,
// idle_timeout.
awaitable<void> serve_banner(target_context& ctx, std::shared_ptr<listener_runtime> listener, tcp::socket socket,
                             tcp::endpoint peer_ep, pending_set::ticket pending = {});

}  // namespace vlessbench::target
