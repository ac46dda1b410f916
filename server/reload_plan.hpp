#pragma once
// What a reload (SIGHUP) changes, decided from the running config and the next one alone: no
// sockets, no files, no clock. server/daemon.cpp applies the plan (binds what it opens, builds the
// TLS context, reopens the access log, then commits); the plan is unit-tested on its own
// (tests/unit/server/test_reload_plan.cpp).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "core/config/config.hpp"

namespace vlessbench {

// One listener of a config, whatever its kind, as the daemon runs it.
struct planned_listener {
  listener_kind kind = listener_kind::vless;
  std::string name;
  asio::ip::tcp::endpoint listen;
  tcp_policy tcp;
  tcp_policy upstream_tcp;                   // a target's is its tcp (it dials nothing)
  transport_spec transport;                  // a vless listener's (applies to connections accepted after a reload)
  std::optional<reality::settings> reality;  // a vless listener's security = "reality"
  path_emulation emulate;                    // netem on its port (server/netem.hpp), reinstalled by a reload
  bool operator==(const planned_listener&) const = default;
};

// The listeners of a config in the daemon's order: every [[vless]], then every [[target]], each in
// file order.
std::vector<planned_listener> listeners_of(const config& c);

// "nodelay=true quickack=kernel", as the daemon's log lines name a policy.
std::string policy_text(const tcp_policy& p);

struct reload_plan {
  // Set: the next config cannot be taken as one step (limits.threads changes at a restart only; a
  // new listener on the port of one this reload closes must wait for a reload of its own);
  // nothing else is set.
  std::optional<std::string> refused;

  // Listeners are matched by endpoint (the one thing a running listener cannot change).
  struct listener_change {
    planned_listener from;  // as running
    planned_listener to;    // as the next config has it
    bool operator==(const listener_change&) const = default;
  };
  // Same endpoint and kind: updated in place, so open connections see the new policy at their next
  // read.
  std::vector<listener_change> keep;
  // Same endpoint, other kind: the bound socket is handed to the new listener (binding it anew
  // would fail while the old one holds it, e.g. two listeners swapping ports); the port stays open.
  std::vector<listener_change> take_over;
  std::vector<planned_listener> open;   // endpoints only the next config has: bound before commit
  std::vector<planned_listener> close;  // endpoints only the running config has

  // [[udp_target]] and [[dns]], matched by endpoint as the TCP listeners are: one on the same
  // endpoint is updated in place (its name; a responder's zone and answers), so its socket and
  // flows stay; the others are closed, and the new ones bound before commit.
  template <class Listener>
  struct socket_changes {
    std::vector<std::pair<Listener, Listener>> keep;  // (as running, as the next config has it), changed
    std::vector<Listener> open;
    std::vector<Listener> close;
  };
  socket_changes<udp_listener_config> udp_targets;
  socket_changes<dns_listener_config> dns;

  // [admin]: the listener moves (closed, then the next endpoint bound before commit) when its
  // endpoint changes; a token change applies to the next request.
  bool admin_rebind = false;
  bool tls_changed = false;        // build a new TLS context (and certificate, tls.generate)
  bool reopen_access_log = false;  // a file is reopened even at the same path (rotation: mv, SIGHUP)
  bool log_level_changed = false;
  bool log_queue_changed = false;

  // What the "reload ok" line lists, in order: listeners updated, taken over, closed, opened, admin
  // listener and token, then log queue, log level, user count. The daemon appends what only applying can tell (sessions
  // of removed users ended).
  std::vector<std::string> changes;
};

reload_plan plan_reload(const config& current, const config& next);

}  // namespace vlessbench
