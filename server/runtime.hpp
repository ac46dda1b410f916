#pragma once
// State the daemon's parts share while it runs. With [limits] threads = 1 everything runs on one
// io_context thread; with more, VLESS sessions run on worker threads too, so what they share with
// the main thread (listeners, log, routes, connection set, counters) is locked or atomic, and the
// rest (the config, the listener's name) is copied into the session when it is accepted. The
// targets see a narrow part of it (target/target_context.hpp), never this struct.
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/log/access_log.hpp"
#include "core/log/emit.hpp"
#include "server/client_budget.hpp"
#include "core/config/config.hpp"
#include "core/runtime/connection_set.hpp"
#include "core/runtime/listener_runtime.hpp"
#include "server/live_config.hpp"
#include "core/runtime/pending_set.hpp"
#include "core/log/refusal_tally.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/log/state_hub.hpp"

namespace vlessbench {

struct runtime {
  std::shared_ptr<const config> cfg;  // main thread only: a session copies it at accept
  live_config live;                   // thread-safe: what sessions admit users and destinations by
  std::uint64_t generation = 1;       // main thread only
  access_log log;                     // thread-safe
  route_registry routes;              // thread-safe
  state_hub hub;                      // thread-safe: what the admin listener shows
  event_emitter events{log, hub};     // one emit per event: its log line and the dashboard's feed
  connection_set connections;         // thread-safe
  pending_set pending;                // thread-safe: connections not yet admitted ([limits] max_pending)
  std::atomic<std::uint64_t> next_session_id{1};
  std::atomic<std::size_t> vless_sessions{0};  // authorised sessions ([limits] max_sessions)
  refusal_tally refusals;                      // thread-safe: vless refusals for the human log (server/refusal_log.hpp)
  client_registry clients;  // thread-safe: per source address and connection ([limits] max_*_per_client)
  std::atomic<bool> stopping{false};
};

}  // namespace vlessbench
