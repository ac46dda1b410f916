#pragma once
// What a target sees of the daemon that runs it: the log, the route registry, the open-connection
// set a drain closes, whether a drain has begun, the running config's limits, and the state hub
// (probe runs, for the admin dashboard), and a target's index page (its share links, made by the
// daemon, which alone sees the users). Nothing else:
// the targets never read the daemon's session counters, users or TLS state.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <asio/ip/address.hpp>

#include "core/log/access_log.hpp"
#include "core/log/emit.hpp"
#include "core/config/config.hpp"
#include "core/runtime/connection_set.hpp"
#include "target/rate_gate.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/log/state_hub.hpp"
#include "target/index_page.hpp"
#include "target/probe_runs.hpp"

namespace vlessbench::target {

struct target_context {
  access_log& log;
  route_registry& routes;
  connection_set& connections;
  const std::atomic<bool>& stopping;
  std::function<limits_config()> limits;  // the running config's: a reload may change them
  state_hub& hub;                         // probe runs for the admin dashboard
  // The ports of the daemon's own UDP listeners (echo and DNS): a datagram from one of them on a
  // local address is never answered (core/runtime/udp_guard.hpp).
  std::function<std::vector<std::uint16_t>()> own_udp_ports = [] { return std::vector<std::uint16_t>{}; };
  // POST /probe/result, every target listener together ([limits] probe_results_per_minute).
  std::shared_ptr<rate_gate> probe_posts = std::make_shared<rate_gate>();
  // Probe run ids and results tokens issued, and the sample requests served (docs/probe.md).
  std::shared_ptr<probe_runs> probe_runs_seen = std::make_shared<probe_runs>();
  // GET / from a browser: the index page of target listener `listener` under the running config
  // (a reload changes it), for a request whose Host header is host_value (absent: nullopt) that
  // arrived on address local. Unset (tests): a page without links.
  std::function<index_answer(std::string_view listener, std::optional<std::string_view> host_value,
                             const asio::ip::address& local)>
      index = [](std::string_view, std::optional<std::string_view>, const asio::ip::address&) {
        return index_answer{false, std::make_shared<const std::string>(index_page(index_content{}))};
      };

  // One call per answer: its access-log line and the dashboard's counters (core/log/emit.hpp).
  event_emitter events() const { return {log, hub}; }
};

}  // namespace vlessbench::target
