// The daemon's reload (SIGHUP: re-read, plan, bind, commit) and the access log's reopen (SIGUSR1):
// what changes the running daemon after start-up. Start-up, accept and drain are server/daemon.cpp,
// the reload's decisions server/reload_plan.
#include <algorithm>

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "core/net/tls.hpp"
#include "server/daemon.hpp"
#include "server/reality_keys.hpp"
#include "server/reload_plan.hpp"

#include <fmt/ranges.h>

namespace vlessbench {

// SIGUSR1, as logrotate expects: a new file at the configured path, the old one closed once the
// lines queued for it are written.
void daemon::reopen_access_log() {
  const std::string target = rt_.log.target();
  if (target == "stdout") {
    spdlog::info("signal SIGUSR1: the access log is stdout: nothing to reopen");
    return;
  }
  try {
    rt_.log.open(target);
    spdlog::info("signal SIGUSR1: reopened access log {}", target);
  } catch (const std::exception& e) {
    spdlog::error("signal SIGUSR1: {}: writing on to the file open before", e.what());
  }
}

void daemon::reload() {
  std::shared_ptr<const config> next;
  if (auto failure = read_reload_config(next)) return reload_failed(*failure);

  // What changes is decided from the two configs alone (server/reload_plan); the rest applies it.
  // Everything that can fail (certificate, binding, the log file) is done before the commit.
  reload_plan plan = plan_reload(*rt_.cfg, *next);
  if (plan.refused) return reload_failed(*plan.refused);

  prepared_reload prepared;
  if (auto failure = prepare_reload(plan, *next, prepared)) return reload_failed(*failure);

  const auto generation = rt_.generation + 1;
  const auto changes = commit_reload(plan, std::move(next), std::move(prepared), generation);
  spdlog::info("reload ok: generation {}: {}", generation,
               changes.empty() ? std::string("no listener changes") : fmt::format("{}", fmt::join(changes, "; ")));
  const config_reload_event event{
      .ok = true, .generation = generation, .changes = static_cast<std::uint64_t>(changes.size())};
  rt_.events.emit(event);
}

void daemon::reload_failed(const std::string& error) {
  spdlog::error("reload failed, keeping generation {}: {}", rt_.generation, error);
  const config_reload_event event{.ok = false, .generation = rt_.generation, .error = error};
  rt_.events.emit(event);
}

std::optional<std::string> daemon::read_reload_config(std::shared_ptr<const config>& next) const {
  if (!config_file_) return "running on the embedded default: there is no file to re-read";
  try {
    auto loaded = load_config_file(*config_file_);
    resolve_reality_keys(loaded, true, rt_.cfg.get());
    next = std::make_shared<const config>(std::move(loaded));
  } catch (const config_error& e) {
    std::string joined;
    for (const auto& err : e.errors()) joined += (joined.empty() ? "" : "; ") + err;
    return joined;
  } catch (const std::exception& e) {
    return e.what();
  }
  return std::nullopt;
}

std::optional<std::string> daemon::prepare_reload(const reload_plan& plan, const config& next,
                                                  prepared_reload& prepared) {
  prepared.tls = tls_;
  if (plan.tls_changed) {
    try {
      tls::ensure_certificate(next.tls);
      prepared.tls = std::make_shared<asio::ssl::context>(tls::make_server_context(next.tls));
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  auto abandon_opened = [&] {
    for (auto& o : prepared.opened) {
      std::error_code ignored;
      o->acceptor.close(ignored);
    }
  };
  for (const auto& w : plan.open) {
    try {
      prepared.opened.push_back(open_listener(w));
    } catch (const std::exception& e) {
      abandon_opened();
      return e.what();
    }
  }

  // Bound here, started at commit; dropped (closed) if the reload fails after this.
  try {
    prepared.sockets = open_sockets(plan);
  } catch (const std::exception& e) {
    abandon_opened();
    return e.what();
  }

  // The emulation the next listeners ask for: it changes the host, so a failure from here on
  // restores the running one.
  const auto running_emulation = netem_.installed();
  if (auto f = netem_.apply(next_emulation(plan, prepared.opened))) {
    abandon_opened();
    netem_.apply(running_emulation);
    return "emulate: cannot install netem: " + f->text();
  }
  auto abandon = [&] {
    abandon_opened();
    netem_.apply(running_emulation);
  };

  if (plan.admin_rebind && next.admin.listen) {
    try {
      prepared.admin = admin_.bind(*next.admin.listen);
    } catch (const std::exception& e) {
      abandon();
      return e.what();
    }
  }

  if (plan.reopen_access_log) {
    try {
      rt_.log.open(next.log.access);
    } catch (const std::exception& e) {
      abandon();
      if (prepared.admin) prepared.admin->close();
      return e.what();
    }
  }
  return std::nullopt;
}

std::vector<netem::emulated_port> daemon::next_emulation(const reload_plan& plan,
                                                         const std::vector<std::shared_ptr<listener>>& opened) const {
  std::vector<netem::emulated_port> ports;
  for (const auto* changes : {&plan.keep, &plan.take_over})
    for (const auto& c : *changes)
      if (c.to.emulate.active()) ports.push_back({c.to.name, c.from.listen, c.to.emulate});
  for (const auto& o : opened)
    if (o->state->emulate.active()) ports.push_back({o->state->name, o->state->endpoint, o->state->emulate});
  return ports;
}

// listeners_ always holds the running config's listeners, so every endpoint the plan keeps, takes
// over or closes is open.
std::vector<std::shared_ptr<daemon::listener>> daemon::commit_listeners(const reload_plan& plan, const config& next,
                                                                        std::vector<std::shared_ptr<listener>> opened,
                                                                        std::uint64_t generation) {
  auto take_running = [&](const tcp::endpoint& ep) {
    auto it = std::find_if(listeners_.begin(), listeners_.end(),
                           [&](const auto& l) { return l && l->state->endpoint == ep; });
    return it == listeners_.end() ? nullptr : std::move(*it);
  };
  std::vector<std::shared_ptr<listener>> next_listeners;
  for (const auto& k : plan.keep) {
    auto l = take_running(k.to.listen);
    if (!l) continue;
    auto& st = *l->state;
    st.name = k.to.name;
    st.tcp = k.to.tcp;
    st.upstream_tcp = k.to.upstream_tcp;
    st.transport = k.to.transport;  // for connections accepted from now on (each copies it at accept)
    if (k.from.reality != k.to.reality) use_reality(st, k.to.reality);
    st.emulate = k.to.emulate;  // installed by prepare_reload
    st.generation = generation;
    next_listeners.push_back(std::move(l));
  }
  for (const auto& t : plan.take_over) {
    auto l = take_running(t.to.listen);
    if (!l) continue;
    l->state->closed = true;  // its open connections keep the old settings
    std::error_code ignored;
    l->acceptor.cancel(ignored);  // ends its accept loop; the socket stays bound and listening
    l->state = make_listener_state(t.to);
    l->state->generation = generation;
    start_accepting(l);
    next_listeners.push_back(std::move(l));
  }
  for (const auto& c : plan.close) {
    auto l = take_running(c.listen);
    if (!l) continue;
    l->state->closed = true;
    std::error_code ignored;
    l->acceptor.close(ignored);  // its accept loop holds the listener until it winds down
  }
  for (auto& o : opened) {
    o->state->generation = generation;
    start_accepting(o);
    next_listeners.push_back(std::move(o));
  }
  // In the next config's order, as listeners_of lists it (names are unique; a port 0 in next is
  // not the bound one).
  const auto wanted = listeners_of(next);
  auto rank = [&](const std::shared_ptr<listener>& l) {
    return std::find_if(wanted.begin(), wanted.end(), [&](const auto& w) { return w.name == l->state->name; }) -
           wanted.begin();
  };
  std::stable_sort(next_listeners.begin(), next_listeners.end(),
                   [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return next_listeners;
}

std::vector<std::string> daemon::commit_reload(reload_plan& plan, std::shared_ptr<const config> next,
                                               prepared_reload prepared, std::uint64_t generation) {
  listeners_ = commit_listeners(plan, *next, std::move(prepared.opened), generation);
  commit_sockets(plan, std::move(prepared.sockets));
  auto& admin = prepared.admin;
  // The admin listener as it runs after the commit: rebound, off, or the running one kept.
  const std::optional<tcp::endpoint> admin_bound =
      !plan.admin_rebind ? rt_.cfg->admin.listen
                         : (admin ? std::optional(admin->local_endpoint()) : std::optional<tcp::endpoint>());
  next = with_bound_ports(*next, admin_bound);

  tls_ = std::move(prepared.tls);
  if (plan.log_queue_changed) rt_.log.set_queue_bytes(next->log.queue_bytes);
  rt_.log.set_max_lines_per_second(next->log.max_lines_per_second);  // unchanged: a no-op
  rt_.log.set_max_session_lines_per_second(next->log.max_session_lines_per_second);
  if (plan.log_level_changed) setup_logging(next->log.level);
  auto changes = std::move(plan.changes);
  if (const auto ended = rt_.live.publish(next); ended > 0)
    changes.push_back(fmt::format("ending {} session(s) of removed users", ended));
  rt_.cfg = std::move(next);
  rt_.generation = generation;
  if (plan.admin_rebind) {
    if (admin)
      admin_.serve(std::move(admin));
    else
      admin_.close();
  }
  publish_listeners();
  wire_reality_fallbacks();
  try {
    write_ports_file();
  } catch (const std::exception& e) {
    spdlog::error("reload: --ports-file: {}", e.what());
  }
  return changes;
}

}  // namespace vlessbench
