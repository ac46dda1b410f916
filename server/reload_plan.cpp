#include "server/reload_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace vlessbench {

namespace {

bool same_tls(const tls_config& a, const tls_config& b) {
  return a.cert == b.cert && a.key == b.key && a.generate == b.generate && a.names == b.names &&
         a.session_tickets == b.session_tickets && a.min_version == b.min_version;
}

// A socket the plan binds or closes: its protocols (1 TCP, 2 UDP, 3 both) and how the log names it.
struct bound_socket {
  int protocols;
  asio::ip::address address;
  unsigned short port;
  std::string what;  // kind "name" on ENDPOINT
};

// Linux refuses to bind a.b.c.d:P next to a bound 0.0.0.0:P (and [x]:P next to [::]:P), as well as
// the same endpoint twice.
// A port-0 socket takes whichever port is free at bind, so it waits for no closing one.
bool clash(const bound_socket& a, const bound_socket& b) {
  if ((a.protocols & b.protocols) == 0 || a.port != b.port || a.port == 0) return false;
  if (a.address == b.address) return true;
  if (a.address.is_v4() != b.address.is_v4()) return false;
  return a.address.is_unspecified() || b.address.is_unspecified();
}

template <class Endpoint>
bound_socket socket_of(int protocols, std::string_view kind, const std::string& name, const Endpoint& ep) {
  return {
      protocols, ep.address(), ep.port(),
      fmt::format("{} \"{}\" on {}", kind, name, format_endpoint(asio::ip::tcp::endpoint(ep.address(), ep.port())))};
}

// New sockets are bound before the commit, old ones closed at it: a new one on the port of one the
// same reload closes (a listener moving from 0.0.0.0:P to an address on P, a [[dns]] taking a
// [[udp_target]]'s endpoint) cannot be bound yet. The refusal says so instead of "address in use".
std::optional<std::string> blocked_by_closing(const reload_plan& plan) {
  std::vector<bound_socket> opening;
  std::vector<bound_socket> closing;
  for (const auto& l : plan.open) opening.push_back(socket_of(1, to_string(l.kind), l.name, l.listen));
  for (const auto& l : plan.close) closing.push_back(socket_of(1, to_string(l.kind), l.name, l.listen));
  for (const auto& u : plan.udp_targets.open) opening.push_back(socket_of(2, "udp_target", u.name, u.listen));
  for (const auto& u : plan.udp_targets.close) closing.push_back(socket_of(2, "udp_target", u.name, u.listen));
  for (const auto& d : plan.dns.open) opening.push_back(socket_of(3, "dns", d.name, d.listen));
  for (const auto& d : plan.dns.close) closing.push_back(socket_of(3, "dns", d.name, d.listen));
  for (const auto& o : opening)
    for (const auto& c : closing)
      if (clash(o, c))
        return fmt::format(
            "{} needs the port of {}, which this reload closes: close that one in a reload "
            "of its own first",
            o.what, c.what);
  return std::nullopt;
}

// Which running listener each wanted one continues (-1: none, it is opened): the one on the same
// endpoint; failing that, for a wanted port 0, the one of the same name on the same address (a
// reload keeps the port a "HOST:0" listener was given; the running config holds the bound ports).
// At most one wanted listener continues each running one.
template <class Listener>
std::vector<std::ptrdiff_t> match_listeners(const std::vector<Listener>& running, const std::vector<Listener>& wanted) {
  std::vector<std::ptrdiff_t> out(wanted.size(), -1);
  std::vector<bool> taken(running.size(), false);
  auto find = [&](auto pred) -> std::ptrdiff_t {
    for (std::size_t i = 0; i < running.size(); ++i)
      if (!taken[i] && pred(running[i])) return static_cast<std::ptrdiff_t>(i);
    return -1;
  };
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    out[w] = find([&](const Listener& r) { return r.listen == wanted[w].listen; });
    if (out[w] >= 0) taken[static_cast<std::size_t>(out[w])] = true;
  }
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    if (out[w] >= 0 || wanted[w].listen.port() != 0) continue;
    out[w] = find([&](const Listener& r) {
      return r.name == wanted[w].name && r.listen.address() == wanted[w].listen.address();
    });
    if (out[w] >= 0) taken[static_cast<std::size_t>(out[w])] = true;
  }
  return out;
}

// Matches the entries of one UDP listener kind (match_listeners), and says what changes.
template <class Listener>
void plan_sockets(const std::vector<Listener>& running, const std::vector<Listener>& wanted, std::string_view kind,
                  reload_plan::socket_changes<Listener>& out, std::vector<std::string>& changes) {
  auto endpoint_text = [](const Listener& l) {
    return format_endpoint(asio::ip::tcp::endpoint(l.listen.address(), l.listen.port()));
  };
  const auto match = match_listeners(running, wanted);
  std::vector<bool> kept(running.size(), false);
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    Listener want = wanted[w];
    if (match[w] < 0) {
      out.open.push_back(want);
      changes.push_back(fmt::format("opened {} \"{}\" on {}", kind, want.name, endpoint_text(want)));
      continue;
    }
    const auto& from = running[static_cast<std::size_t>(match[w])];
    kept[static_cast<std::size_t>(match[w])] = true;
    want.listen = from.listen;  // a port 0 keeps the bound port
    if (!(from == want)) {
      out.keep.emplace_back(from, want);
      changes.push_back(fmt::format("{} \"{}\" on {} updated", kind, want.name, endpoint_text(want)));
    }
  }
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (kept[i]) continue;
    out.close.push_back(running[i]);
    changes.push_back(fmt::format("closed {} \"{}\" on {}", kind, running[i].name, endpoint_text(running[i])));
  }
}

}  // namespace

std::string policy_text(const tcp_policy& p) {
  return fmt::format("nodelay={} quickack={}", p.nodelay, to_string(p.quickack));
}

std::vector<planned_listener> listeners_of(const config& c) {
  std::vector<planned_listener> out;
  out.reserve(c.vless.size() + c.target.size());
  for (const auto& v : c.vless)
    out.push_back({listener_kind::vless, v.name, v.listen, v.tcp, v.upstream_tcp, v.transport, v.reality, v.emulate});
  for (const auto& t : c.target) out.push_back({t.kind(), t.name, t.listen, t.tcp, t.tcp, {}, {}, t.emulate});
  return out;
}

namespace {

// A listener kept on its endpoint: its policies, and what else changed. A transport change
// applies to connections accepted after the reload (the listener's runtime carries it, each
// accepted connection copies it); the line says so after the policies, which it leaves as they
// were. An emulate change is reinstalled before the commit.
std::string kept_listener_change(const planned_listener& from, const planned_listener& to) {
  const bool transport = from.transport != to.transport || from.reality != to.reality;
  const bool emulate = from.emulate != to.emulate;
  return fmt::format("{} \"{}\" on {}: {} -> {}{}{}{}", to_string(from.kind), to.name, format_endpoint(from.listen),
                     policy_text(from.tcp), policy_text(to.tcp),
                     from.kind == listener_kind::vless ? " (upstream " + policy_text(to.upstream_tcp) + ")" : "",
                     transport ? "; transport " + describe(from.transport) + " -> " + describe(to.transport) : "",
                     emulate ? "; emulate " + describe(from.emulate) + " -> " + describe(to.emulate) : "");
}

}  // namespace

reload_plan plan_reload(const config& current, const config& next) {
  reload_plan plan;
  if (next.limits.threads != current.limits.threads) {
    plan.refused = fmt::format("limits.threads {} -> {}: the thread count changes at a restart only",
                               current.limits.threads, next.limits.threads);
    return plan;
  }
  plan.tls_changed = !same_tls(next.tls, current.tls);

  const auto running = listeners_of(current);
  const auto wanted = listeners_of(next);
  const auto match = match_listeners(running, wanted);
  std::vector<bool> matched(running.size(), false);
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    if (match[w] < 0) {
      plan.open.push_back(wanted[w]);
      continue;
    }
    const auto& from = running[static_cast<std::size_t>(match[w])];
    matched[static_cast<std::size_t>(match[w])] = true;
    auto to = wanted[w];
    to.listen = from.listen;  // a port 0 keeps the bound port
    (from.kind == to.kind ? plan.keep : plan.take_over).push_back({from, to});
  }
  for (std::size_t i = 0; i < running.size(); ++i)
    if (!matched[i]) plan.close.push_back(running[i]);

  for (const auto& [from, to] : plan.keep)
    if (from != to) plan.changes.push_back(kept_listener_change(from, to));
  for (const auto& [from, to] : plan.take_over)
    plan.changes.push_back(fmt::format("{} \"{}\" on {} is now {} \"{}\" ({})", to_string(from.kind), from.name,
                                       format_endpoint(to.listen), to_string(to.kind), to.name, policy_text(to.tcp)));
  for (const auto& l : plan.close)
    plan.changes.push_back(fmt::format("closed {} \"{}\" on {}", to_string(l.kind), l.name, format_endpoint(l.listen)));
  for (const auto& l : plan.open)
    plan.changes.push_back(fmt::format("opened {} \"{}\" on {} ({})", to_string(l.kind), l.name,
                                       format_endpoint(l.listen), policy_text(l.tcp)));

  plan_sockets(current.udp_target, next.udp_target, "udp_target", plan.udp_targets, plan.changes);
  plan_sockets(current.dns, next.dns, "dns", plan.dns, plan.changes);
  if (auto blocked = blocked_by_closing(plan)) {
    reload_plan refused;
    refused.refused = std::move(blocked);
    return refused;
  }

  const auto admin_text = [](const admin_config& a) {
    return a.listen ? format_endpoint(*a.listen) : std::string("off");
  };
  // "HOST:0" keeps the running admin listener on HOST (and its port).
  const bool admin_kept = next.admin.listen && current.admin.listen && next.admin.listen->port() == 0 &&
                          next.admin.listen->address() == current.admin.listen->address();
  plan.admin_rebind = !admin_kept && next.admin.listen != current.admin.listen;
  if (plan.admin_rebind) plan.changes.push_back("admin " + admin_text(current.admin) + " -> " + admin_text(next.admin));
  if (next.admin.token != current.admin.token) plan.changes.emplace_back("admin token changed");
  if (next.admin.header_timeout != current.admin.header_timeout ||
      next.admin.max_connections != current.admin.max_connections ||
      next.admin.max_pending != current.admin.max_pending ||
      next.admin.max_connections_per_client != current.admin.max_connections_per_client)
    plan.changes.emplace_back("admin limits changed (new connections)");

  plan.reopen_access_log = next.log.access != current.log.access || next.log.access != "stdout";
  plan.log_queue_changed = next.log.queue_bytes != current.log.queue_bytes;
  if (plan.log_queue_changed)
    plan.changes.push_back(fmt::format("log queue {} -> {} bytes", current.log.queue_bytes, next.log.queue_bytes));
  plan.log_level_changed = next.log.level != current.log.level;
  if (plan.log_level_changed) plan.changes.push_back("log level " + current.log.level + " -> " + next.log.level);
  if (next.users.size() != current.users.size()) plan.changes.push_back(fmt::format("{} user(s)", next.users.size()));
  return plan;
}

}  // namespace vlessbench
