// The daemon's start-up, accept loops and drain. The reload and the access log's reopen are
// server/daemon_reload.cpp, the reload's decisions server/reload_plan, the admin listener's serving
// server/admin_server, the UDP listeners and DNS responders server/daemon_sockets.
#include "server/daemon.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <iostream>

#include <systemd/sd-daemon.h>

#include "core/log/access_events.hpp"
#include "server/destination_policy.hpp"
#include "target/banner_target.hpp"
#include "target/http_target.hpp"
#include "core/log/logging.hpp"
#include "core/wire/share_link.hpp"
#include "core/net/tls.hpp"
#include "server/buffer_pool.hpp"
#include "server/links.hpp"
#include "server/refusal_log.hpp"
#include "server/reject_code.hpp"
#include "server/reload_plan.hpp"
#include "server/vless_server.hpp"
#include "core/net/watchdog.hpp"

#include <fmt/ranges.h>

namespace vlessbench {
namespace {

void log_exception(std::exception_ptr e, std::string_view what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{}: unexpected exception: {}", what, ex.what());
  }
}

void notify(const char* state) { sd_notify(0, state); }

// The refusals counted in their second (server/refusal_log.hpp) reach the human log once it is over.
awaitable<void> refusal_loop(runtime& rt) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!rt.stopping) {
    timer.expires_after(refusal_tally::period);
    auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
    if (ec) co_return;
    for (const auto& r : rt.refusals.due(refusal_tally::clock::now())) log_refusals(r);
  }
}

// Memory the daemon's threads freed goes back to the system (issue 23 item 10). Once a period on
// every io_context thread, that thread's buffer pool gives back the blocks it did not need; on the
// first thread the heap is trimmed (malloc_trim) when blocks went back or the open connections fell
// by heap_trim_closes since the last trim: glibc returns freed memory in the middle of its heap only
// then, so a burst of sessions otherwise left the RSS at its peak. Nothing here runs per read.
constexpr auto memory_period = std::chrono::seconds(1);
constexpr std::size_t heap_trim_closes = 64;

awaitable<void> memory_loop(runtime& rt, bool trims_heap) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::uint64_t released = buffer_pool::released();
  std::size_t peak = rt.connections.size();
  while (!rt.stopping) {
    timer.expires_after(memory_period);
    auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
    if (ec) co_return;
    buffer_pool::trim();
    if (!trims_heap) continue;
    const std::size_t open = rt.connections.size();
    peak = std::max(peak, open);
    if (buffer_pool::released() == released && peak < open + heap_trim_closes) continue;
    const auto t0 = steady_clock::now();
    const int returned = ::malloc_trim(0);
    spdlog::debug("heap trim: {} pooled block(s) freed, {} connection(s) closed since the last; {} in {} us",
                  buffer_pool::released() - released, peak - open,
                  returned != 0 ? "memory returned" : "nothing to return",
                  std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - t0).count());
    released = buffer_pool::released();
    peak = open;
  }
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

}  // namespace

daemon::daemon(std::shared_ptr<const config> cfg, std::optional<std::filesystem::path> config_file)
    : config_file_(std::move(config_file)), signals_(io_, SIGHUP, SIGTERM, SIGINT) {
  // Their default action would end the daemon without a word (docs/deploy.md, "Signals").
  for (int sig : {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM}) signals_.add(sig);
  rt_.cfg = std::move(cfg);
  target_.own_udp_ports = [this] { return own_udp_ports(); };
  // The index page reads the running config (bound ports, this generation's users and listeners) at
  // each request, on io_ as reloads are: a reload that renames or adds a listener shows at once.
  // Pages are rendered once per config, target and host (index_cache).
  target_.index = [this, cache = std::make_shared<index_cache>()](std::string_view target_name,
                                                                  std::optional<std::string_view> host_value,
                                                                  const asio::ip::address& local) {
    try {
      return cache->get(rt_.cfg, target_name, host_value, local).answer;
    } catch (const std::exception& e) {
      target::index_content c;
      c.links = true;
      c.problem = e.what();
      return target::index_answer{false, std::make_shared<const std::string>(target::index_page(c))};
    }
  };
  rt_.live.publish(rt_.cfg);
  rt_.log.set_queue_bytes(rt_.cfg->log.queue_bytes);
  rt_.log.set_max_lines_per_second(rt_.cfg->log.max_lines_per_second);
  rt_.log.set_max_session_lines_per_second(rt_.cfg->log.max_session_lines_per_second);
  rt_.log.open(rt_.cfg->log.access);
  // Said at start, not discovered as refused sessions later: without the machine's addresses a
  // wildcard [[target]] is reachable through VLESS on loopback only, and a generated certificate
  // names loopback only.
  if (const int err = read_machine_addresses().error; err != 0)
    spdlog::error(
        "cannot read this machine's addresses (getifaddrs: {}): VLESS sessions to a [[target]] on a "
        "wildcard address will be refused (dest_not_allowed) except through loopback; under systemd "
        "the unit's RestrictAddressFamilies must include AF_NETLINK",
        std::strerror(err));
  if (tls::ensure_certificate(rt_.cfg->tls))
    spdlog::info("generated a self-signed certificate: {} (key {})", rt_.cfg->tls.cert, rt_.cfg->tls.key);
  tls_ = std::make_shared<asio::ssl::context>(tls::make_server_context(rt_.cfg->tls));
}

daemon::~daemon() {
  stop_workers();
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

void daemon::start_workers(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i) {
    auto w = std::make_unique<worker>();
    asio::co_spawn(w->io, memory_loop(rt_, false), [](std::exception_ptr e) { log_exception(e, "memory loop"); });
    w->thread = std::thread([&io = w->io, i] {
      const auto name = fmt::format("vlessbenchd-{}", i);
      pthread_setname_np(pthread_self(), name.c_str());
      for (;;) {
        try {
          io.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("worker thread {}: unexpected exception: {}", i, e.what());
        }
      }
    });
    workers_.push_back(std::move(w));
  }
}

void daemon::stop_workers() {
  for (auto& w : workers_) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  workers_.clear();
}

asio::io_context& daemon::session_context() {
  const auto n = workers_.size() + 1;
  const auto i = next_context_++ % n;
  return i == 0 ? io_ : workers_[i - 1]->io;
}

std::shared_ptr<listener_runtime> daemon::make_listener_state(const planned_listener& p) const {
  auto st = std::make_shared<listener_runtime>();
  st->name = p.name;
  st->kind = p.kind;
  st->endpoint = p.listen;
  st->tcp = p.tcp;
  st->upstream_tcp = p.upstream_tcp;
  st->transport = p.transport;
  use_reality(*st, p.reality);
  st->emulate = p.emulate;
  st->generation = rt_.generation;
  return st;
}

void daemon::use_reality(listener_runtime& st, const std::optional<reality::settings>& s) {
  if (!s) {
    st.reality.reset();
    st.reality_tls.reset();
    return;
  }
  st.reality = std::make_shared<reality::listener_state>(*s);
  st.reality_tls = std::make_shared<asio::ssl::context>(reality::make_context(st.reality));
}

// A REALITY listener relays refused connections to its target, by default the daemon's first
// HTTPS target (on loopback when it listens on every address): known once the targets are bound.
void daemon::wire_reality_fallbacks() {
  std::optional<tcp::endpoint> https;
  for (const auto& l : listeners_)
    if (l->state->kind == listener_kind::https && !https) https = l->state->endpoint;
  for (const auto& l : listeners_) {
    auto& r = l->state->reality;
    if (!r) continue;
    const auto& target = r->config().target;
    if (!target.empty()) {
      const auto colon = target.rfind(':');
      std::string host = target.substr(0, colon);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
      r->set_fallback(host, static_cast<std::uint16_t>(std::stoul(target.substr(colon + 1))));
    } else if (https) {
      auto addr = https->address();
      if (addr.is_unspecified())
        addr = addr.is_v4() ? asio::ip::address(asio::ip::address_v4::loopback())
                            : asio::ip::address(asio::ip::address_v6::loopback());
      r->set_fallback(addr.to_string(), https->port());
    }
  }
}

std::shared_ptr<daemon::listener> daemon::open_listener(const planned_listener& p) {
  const auto kind = p.kind;
  const auto& name = p.name;
  const auto& ep = p.listen;
  auto l = std::make_shared<listener>(listener{make_listener_state(p), tcp::acceptor(io_)});
  std::error_code ec;
  l->acceptor.open(ep.protocol(), ec);
  if (!ec) l->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && ep.address().is_v6()) l->acceptor.set_option(asio::ip::v6_only(true), ec);
  if (!ec) l->acceptor.bind(ep, ec);
  if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) l->state->endpoint = l->acceptor.local_endpoint(ec);  // port 0: the one the kernel gave
  if (ec)
    throw std::runtime_error(fmt::format("{} listener \"{}\" cannot listen on {}: {}", to_string(kind), name,
                                         format_endpoint(ep), ec.message()));
  return l;
}

void daemon::start_accepting(const std::shared_ptr<listener>& l) {
  asio::co_spawn(io_, accept_loop(l),
                 [name = l->state->name](std::exception_ptr e) { log_exception(e, "accept loop " + name); });
}

awaitable<void> daemon::accept_loop(std::shared_ptr<listener> l) {
  // l keeps the acceptor alive: a reload may drop the listener while this loop winds down.
  auto state = l->state;
  auto& acceptor = l->acceptor;
  asio::steady_timer backoff(io_);
  const bool vless = state->kind == listener_kind::vless;
  for (;;) {
    keep_spare_fd();
    // A VLESS session runs on the context its socket is accepted into; the target stays here.
    // An XHTTP listener's connections all run on one (server/vless_server.cpp, xhttp_hub_of).
    const bool xhttp = vless && state->transport.kind == transport_kind::xhttp;
    if (xhttp && l->xhttp_context == nullptr) l->xhttp_context = &session_context();
    auto& context = xhttp ? *l->xhttp_context : vless ? session_context() : io_;
    // The peer as accept() returns it: a connection reset while it waited in the backlog is still
    // accepted, but getpeername() on it fails, so the log would lose who it was.
    tcp::endpoint peer;
    auto [ec, socket] = co_await acceptor.async_accept(context, peer, as_tuple_awaitable);
    if (state->closed || rt_.stopping) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      const bool out_of_fds = ec == asio::error::no_descriptors || ec.value() == ENFILE;
      const bool shed = out_of_fds && shed_connection(*l);
      // The warning at most once a second while out of descriptors, whether or not every
      // pending connection could be shed (so the human log says so even then).
      const auto now = steady_clock::now();
      if (!out_of_fds || now - last_shed_warning_ >= std::chrono::seconds(1)) {
        spdlog::warn("{} {}: accept: {}{}", to_string(state->kind), state->name, ec.message(),
                     shed_count_ ? fmt::format(" ({} connection(s) closed at once since the last warning)", shed_count_)
                                 : std::string());
        if (out_of_fds) {
          last_shed_warning_ = now;
          shed_count_ = 0;
        }
      }
      if (shed) continue;  // the next pending one, if any
      // Out of descriptors with nothing pending (or another error): back off instead of spinning.
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(as_tuple_awaitable);
      continue;
    }
    if (state->kind == listener_kind::banner) {
      asio::co_spawn(
          io_, target::serve_banner(target_, state, std::move(socket), peer, admit_pending(*state, io_.get_executor())),
          [](std::exception_ptr e) { log_exception(e, "banner connection"); });
      continue;
    }
    if (!vless) {
      asio::co_spawn(
          io_,
          target::serve_connection(target_, state, std::move(socket), peer, admit_pending(*state, io_.get_executor()),
                                   state->kind == listener_kind::https ? tls_ : nullptr),
          [](std::exception_ptr e) { log_exception(e, "target connection"); });
      continue;
    }
    // Only authorised sessions count against max_sessions (silent connections wait in the pending
    // set); all of them taken, a new connection could only be refused later, after a handshake.
    if (rt_.vless_sessions >= rt_.cfg->limits.max_sessions) {
      refuse_at_accept(*state, socket, peer, reject_code::too_many_sessions);
      continue;
    }
    // A source address at its session cap is refused before a handshake it could only lose later.
    auto budget = rt_.clients.connect(peer.address());
    if (budget->client().sessions.value() >= rt_.cfg->limits.max_sessions_per_client) {
      refuse_at_accept(*state, socket, peer, reject_code::too_many_sessions_from_client,
                       std::to_string(rt_.cfg->limits.max_sessions_per_client) +
                           " sessions open from this address ([limits] max_sessions_per_client)");
      continue;
    }
    vless_server::session_start start{
        vless_server::listener_snapshot::of(state, state->reality_tls ? state->reality_tls : tls_, rt_.cfg),
        rt_.next_session_id++, peer, admit_pending(*state, socket.get_executor()), std::move(budget)};
    const auto executor = socket.get_executor();
    asio::co_spawn(executor, vless_server::serve_session(rt_, std::move(start), std::move(socket)),
                   [](std::exception_ptr e) { log_exception(e, "vless session"); });
  }
}

template <class Socket>
void daemon::refuse_at_accept(const listener_runtime& state, Socket& socket, const tcp::endpoint& peer,
                              reject_code reason, const std::string& detail) {
  std::error_code ignored;
  const auto client = format_endpoint(peer);
  const vless_reject_event event{
      .listener = state.name, .client = client, .reason = to_string(reason), .phase = "accept", .detail = detail};
  rt_.events.emit(event);
  note_refusal(rt_, event.reason, fmt::format("{} on {}", client, state.name));
  socket.close(ignored);
}

pending_set::ticket daemon::admit_pending(const listener_runtime& l, const asio::any_io_executor& ex) {
  const auto cap = pending_cap(rt_.cfg->limits.max_pending, nofile_limit());
  std::size_t evicted = 0;
  auto ticket = rt_.pending.admit(ex, cap, &evicted);
  if (evicted > 0) {
    evicted_count_ += evicted;
    // At most once a second: under a flood of silent connections this would be a line each.
    if (const auto now = steady_clock::now(); now - last_evict_warning_ >= std::chrono::seconds(1)) {
      spdlog::warn(
          "{} {}: {} pending connection(s) closed to admit newer ones (pending cap {}: [limits] "
          "max_pending, at most half the descriptor limit)",
          to_string(l.kind), l.name, evicted_count_, cap);
      last_evict_warning_ = now;
      evicted_count_ = 0;
    }
  }
  return ticket;
}

void daemon::keep_spare_fd() {
  // With threads > 1 a session's socket() on another thread can take the descriptor between the
  // close and the reopen below: the reserve is taken back before the next accept.
  if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

bool daemon::shed_connection(listener& l) {
  if (spare_fd_ < 0) return false;
  ::close(spare_fd_);
  spare_fd_ = -1;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int fd = ::accept4(l.acceptor.native_handle(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
  if (fd >= 0) ::close(fd);
  keep_spare_fd();
  if (fd < 0) return false;  // nothing pending
  ++shed_count_;
  if (l.state->kind == listener_kind::vless) {
    tcp::endpoint peer;
    if (len <= peer.capacity()) {
      std::memcpy(peer.data(), &addr, len);
      peer.resize(len);
    }
    const auto client = format_endpoint(peer);
    const vless_reject_event event{
        .listener = l.state->name, .client = client, .reason = to_string(reject_code::fd_exhausted), .phase = "accept"};
    rt_.events.emit(event);
  }
  return true;
}

void daemon::print_links() const {
  for (const auto& l : listeners_) {
    if (l->state->kind != listener_kind::vless) continue;
    for (const auto& u : rt_.cfg->users) {
      const auto it = std::find_if(rt_.cfg->vless.begin(), rt_.cfg->vless.end(),
                                   [&](const vless_listener_config& c) { return c.name == l->state->name; });
      if (it == rt_.cfg->vless.end()) continue;
      auto addr = l->state->endpoint.address();
      for (const auto& link : startup_links(*it, u, addr.is_unspecified() ? "YOUR-VM-ADDRESS" : addr.to_string(),
                                            rt_.cfg->tls.cert.empty() || rt_.cfg->tls.generate))
        spdlog::info("share link ({} / {}): {}", l->state->name, u.name, format_share_link(link));
    }
  }
}

void daemon::start_emulation() {
  std::optional<netem::failure> error;
  const auto cleaned = netem_.clear_leftovers(error);
  if (!cleaned.empty())
    spdlog::warn("emulate: removed the netem qdiscs a previous daemon left on {}", fmt::join(cleaned, ", "));
  std::vector<netem::emulated_port> ports;
  for (const auto& l : listeners_)
    if (l->state->emulate.active()) ports.push_back({l->state->name, l->state->endpoint, l->state->emulate});
  if (ports.empty()) {
    if (error) spdlog::warn("emulate: {}", error->text());
    return;
  }
  if (auto f = netem_.apply(ports))
    throw std::runtime_error(
        fmt::format("emulate on listener \"{}\": cannot install netem: {}", ports.front().listener, f->text()));
  for (const auto& p : ports)
    spdlog::info("emulate: listener \"{}\" (port {}): {} on what this host sends", p.listener, p.listen.port(),
                 describe(p.emulate));
}

void daemon::publish_listeners() {
  std::vector<listener_view> views;
  for (const auto& l : listeners_) {
    const auto& st = *l->state;
    listener_view v{std::string(to_string(st.kind)),
                    st.name,
                    format_endpoint(st.endpoint),
                    policy_text(st.tcp.load()),
                    st.kind == listener_kind::vless ? policy_text(st.upstream_tcp.load()) : std::string(),
                    ""};
    if (st.kind == listener_kind::vless) v.transport = std::string(to_string(st.transport.kind));
    v.emulate = st.emulate.active() ? describe(st.emulate) : std::string();
    v.emulate_delay_ms = st.emulate.delay_ms;
    v.emulate_loss_pct = st.emulate.loss_pct;
    views.push_back(std::move(v));
  }
  // The UDP listeners have no TCP socket policy; the DNS responder's TCP half shares its port.
  for (const auto& u : udp_targets_)
    views.push_back(
        {"udp", u->name(), format_endpoint(tcp::endpoint(u->endpoint().address(), u->endpoint().port())), "", "", ""});
  for (const auto& d : dns_) views.push_back({"dns", d->name(), format_endpoint(d->endpoint()), "", "", ""});
  rt_.hub.set_listeners(rt_.generation, std::move(views));
}

bound_ports daemon::bound_now(std::optional<tcp::endpoint> admin) const {
  bound_ports out;
  for (const auto& l : listeners_) out.listeners.emplace_back(l->state->name, l->state->endpoint);
  for (const auto& u : udp_targets_)
    out.listeners.emplace_back(u->name(), tcp::endpoint(u->endpoint().address(), u->endpoint().port()));
  for (const auto& d : dns_) out.listeners.emplace_back(d->name(), d->endpoint());
  out.admin = admin;
  return out;
}

std::shared_ptr<const config> daemon::with_bound_ports(const config& c, std::optional<tcp::endpoint> admin) const {
  auto resolved = std::make_shared<config>(c);
  if (const auto missing = resolve_ports(*resolved, bound_now(admin)); !missing.empty())
    throw std::logic_error(fmt::format("port 0 of {} not bound", fmt::join(missing, ", ")));
  return resolved;
}

void daemon::write_ports_file() const {
  if (ports_file_) write_file_atomically(*ports_file_, format_ports_file(*rt_.cfg, rt_.generation));
}

std::vector<std::string> daemon::describe_listeners() const {
  std::vector<std::string> out;
  for (const auto& l : listeners_)
    out.push_back(std::string(to_string(l->state->kind)) + " " + l->state->name + " " +
                  format_endpoint(l->state->endpoint));
  for (const auto& d : dns_) out.push_back("dns " + d->name() + " " + format_endpoint(d->endpoint()));
  for (const auto& u : udp_targets_)
    out.push_back("udp_target " + u->name() + " " +
                  format_endpoint(tcp::endpoint(u->endpoint().address(), u->endpoint().port())));
  return out;
}

int daemon::run() {
  {
    const auto& written = *rt_.cfg;
    for (const auto& l : listeners_of(written)) listeners_.push_back(open_listener(l));
    for (const auto& u : written.udp_target) udp_targets_.push_back(open_udp_target(u));
    for (const auto& d : written.dns) dns_.push_back(open_dns(d));
  }
  std::shared_ptr<tcp::acceptor> admin;
  if (rt_.cfg->admin.listen) admin = admin_.bind(*rt_.cfg->admin.listen);
  // From here on the running config names the bound ports: the destination policy, the dashboard,
  // the share links and a reload see what a "HOST:0" listener was given.
  rt_.cfg = with_bound_ports(*rt_.cfg, admin ? std::optional(admin->local_endpoint()) : std::nullopt);
  rt_.live.publish(rt_.cfg);
  wire_reality_fallbacks();
  const auto& cfg = *rt_.cfg;
  start_emulation();
  start_workers(cfg.limits.threads);  // before any accept loop hands sessions to them
  for (auto& l : listeners_) {
    spdlog::info("{} listener \"{}\" on {} ({})", to_string(l->state->kind), l->state->name,
                 format_endpoint(l->state->endpoint), policy_text(l->state->tcp.load()));
    start_accepting(l);
  }
  for (auto& u : udp_targets_) {
    spdlog::info("udp_target listener \"{}\" ({}) on {}", u->name(), to_string(u->mode()),
                 format_endpoint(tcp::endpoint(u->endpoint().address(), u->endpoint().port())));
    u->start();
  }
  for (auto& d : dns_) {
    spdlog::info("dns listener \"{}\" on {} (UDP and TCP)", d->name(), format_endpoint(d->endpoint()));
    d->start();
  }
  if (admin) admin_.serve(std::move(admin));
  publish_listeners();
  print_links();
  write_ports_file();  // throws (start fails) when the file cannot be written
  keep_spare_fd();
  asio::co_spawn(io_, signal_loop(), [](std::exception_ptr e) { log_exception(e, "signal loop"); });
  asio::co_spawn(io_, refusal_loop(rt_), [](std::exception_ptr e) { log_exception(e, "refusal loop"); });
  asio::co_spawn(io_, memory_loop(rt_, true), [](std::exception_ptr e) { log_exception(e, "memory loop"); });
  notify("READY=1");
  spdlog::info("vlessbenchd ready (config {}, generation {}, {} thread(s))", cfg.source, rt_.generation,
               cfg.limits.threads);
  io_.run();
  stop_workers();
  netem_.remove();
  // The sessions' last lines may still wait for a slow reader: they get a bounded time.
  if (const auto lost = rt_.log.shutdown(rt_.cfg->limits.drain_timeout); lost > 0)
    spdlog::warn("access log: {} line(s) not written at exit: the reader of {} did not keep up", lost,
                 rt_.log.target());
  if (const auto dropped = rt_.log.counters().dropped_lines; dropped > 0)
    spdlog::warn("access log: {} line(s) dropped in all while its reader did not keep up", dropped);
  if (ports_file_) {
    std::error_code ignored;
    std::filesystem::remove(*ports_file_, ignored);  // it describes a running daemon
  }
  spdlog::info("vlessbenchd stopped");
  return 0;
}

awaitable<void> daemon::signal_loop() {
  for (;;) {
    auto [ec, sig] = co_await signals_.async_wait(as_tuple_awaitable);
    if (ec) co_return;
    if (sig == SIGHUP) {
      notify("RELOADING=1");
      reload();
      notify("READY=1");
      continue;
    }
    if (sig == SIGUSR1) {
      reopen_access_log();
      continue;
    }
    if (sig == SIGUSR2 || sig == SIGALRM) {
      spdlog::info("signal {}: ignored", signal_name(sig));
      continue;
    }
    // SIGTERM, SIGINT, SIGQUIT.
    spdlog::info("signal {}: draining", signal_name(sig));
    co_await drain();
    co_return;
  }
}

awaitable<void> daemon::drain() {
  notify("STOPPING=1");
  rt_.stopping = true;
  for (auto& l : listeners_) {
    l->state->closed = true;
    std::error_code ignored;
    l->acceptor.close(ignored);
  }
  admin_.close();
  rt_.connections.close_all(false);
  for (auto& u : udp_targets_) u->stop();  // its open flows are logged now
  for (auto& d : dns_) d->stop();
  const auto deadline = steady_clock::now() + rt_.cfg->limits.drain_timeout;
  asio::steady_timer timer(io_);
  while (rt_.connections.size() > 0 && steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(as_tuple_awaitable);
  }
  if (const auto left = rt_.connections.size(); left > 0) {
    spdlog::warn("drain deadline passed: closing {} open connection(s)", left);
    rt_.connections.close_all(true);
    // Let the sessions write their close lines.
    for (int i = 0; i < 100 && rt_.connections.size() > 0; ++i) {
      timer.expires_after(std::chrono::milliseconds(10));
      co_await timer.async_wait(as_tuple_awaitable);
    }
  }
  io_.stop();
}

}  // namespace vlessbench
