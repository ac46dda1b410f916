#pragma once
// vlessbenchd's lifecycle: listeners, signals (SIGHUP reload, SIGUSR1 reopen the access log,
// SIGTERM/SIGINT/SIGQUIT drain, SIGUSR2/SIGALRM ignored), applying a reload (what it changes is
// decided by server/reload_plan).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/net/asio_compat.hpp"
#include "server/admin_server.hpp"
#include "server/netem.hpp"
#include "server/ports_file.hpp"
#include "server/reject_code.hpp"
#include "server/reload_plan.hpp"
#include "server/runtime.hpp"
#include "target/target_context.hpp"
#include "target/dns_target.hpp"
#include "target/udp_target.hpp"

namespace vlessbench {

class daemon {
 public:
  // config_file empty: running on the embedded default (SIGHUP then has nothing to re-read).
  daemon(std::shared_ptr<const config> cfg, std::optional<std::filesystem::path> config_file);
  ~daemon();
  // Binds every listener (throws std::runtime_error naming the listener that failed), then serves
  // until a signal stops it. Returns the process exit code.
  int run();
  // Before run(): after every listener is bound, and after each reload that succeeded, the bound
  // endpoints are written to path (server/ports_file.hpp); the file is removed at exit.
  void set_ports_file(std::filesystem::path path) { ports_file_ = std::move(path); }
  // For tests: the listeners currently open, "kind name endpoint", in the config's order.
  std::vector<std::string> describe_listeners() const;

 private:
  struct listener {
    std::shared_ptr<listener_runtime> state;
    tcp::acceptor acceptor;
    // XHTTP: a session's requests come on several connections and its hub serves one thread, so
    // every connection of the listener runs on the context picked at its first.
    asio::io_context* xhttp_context = nullptr;
  };

  std::shared_ptr<listener_runtime> make_listener_state(const planned_listener& p) const;
  std::shared_ptr<listener> open_listener(const planned_listener& p);
  void start_accepting(const std::shared_ptr<listener>& l);
  // [[udp_target]]: bound at start (throws naming the listener), stopped by a drain.
  std::shared_ptr<target::udp_echo_target> open_udp_target(const udp_listener_config& c);
  // [[dns]]: UDP and TCP bound at start (throws naming the listener), stopped by a drain.
  std::shared_ptr<target::dns_responder> open_dns(const dns_listener_config& c);
  // A reload's [[udp_target]] and [[dns]] changes (server/daemon_sockets.cpp): the new ones are
  // bound before the commit (throws naming the listener), then started, updated or stopped.
  struct opened_sockets {
    std::vector<std::shared_ptr<target::udp_echo_target>> udp_targets;
    std::vector<std::shared_ptr<target::dns_responder>> dns;
  };
  opened_sockets open_sockets(const reload_plan& plan);
  void commit_sockets(const reload_plan& plan, opened_sockets opened);
  awaitable<void> accept_loop(std::shared_ptr<listener> l);
  bool shed_connection(listener& l);
  // A VLESS connection refused at accept, before its handshake: its vless.reject line, the socket closed.
  template <class Socket>
  void refuse_at_accept(const listener_runtime& state, Socket& socket, const tcp::endpoint& peer, reject_code reason,
                        const std::string& detail = {});
  // A newly accepted connection joins the pending set (evicting the oldest at the cap).
  pending_set::ticket admit_pending(const listener_runtime& l, const asio::any_io_executor& ex);
  void keep_spare_fd();
  // security = "reality": the listener's REALITY state and context (reset without).
  static void use_reality(listener_runtime& st, const std::optional<reality::settings>& s);
  void wire_reality_fallbacks();
  awaitable<void> signal_loop();
  awaitable<void> drain();
  // SIGHUP (server/daemon_reload.cpp): read → plan → prepare → commit → report; a failed step keeps
  // the running generation.
  void reload();
  // What a reload sets up before its commit, everything that can fail; dropped (closed) on failure.
  struct prepared_reload {
    std::shared_ptr<asio::ssl::context> tls;
    std::vector<std::shared_ptr<listener>> opened;  // bound here, started at commit
    opened_sockets sockets;
    std::shared_ptr<tcp::acceptor> admin;  // a rebound admin listener
  };
  void reload_failed(const std::string& error);
  std::optional<std::string> read_reload_config(std::shared_ptr<const config>& next) const;
  std::optional<std::string> prepare_reload(const reload_plan& plan, const config& next, prepared_reload& prepared);
  // The listeners the next generation runs, started, in next's order; the ones it drops closed.
  std::vector<std::shared_ptr<listener>> commit_listeners(const reload_plan& plan, const config& next,
                                                          std::vector<std::shared_ptr<listener>> opened,
                                                          std::uint64_t generation);
  // Returns the changes to report.
  std::vector<std::string> commit_reload(reload_plan& plan, std::shared_ptr<const config> next,
                                         prepared_reload prepared, std::uint64_t generation);
  void reopen_access_log();
  // Path emulation (server/netem.hpp): at start, what a dead daemon left is removed and the
  // listeners' emulation installed (throws naming the reason and the remedy); a reload's next
  // listeners' installed before its commit (the running ones' restored on failure).
  void start_emulation();
  std::vector<netem::emulated_port> next_emulation(const reload_plan& plan,
                                                   const std::vector<std::shared_ptr<listener>>& opened) const;
  void print_links() const;
  // What every running listener is bound to, by name; admin: the admin listener's endpoint.
  bound_ports bound_now(std::optional<tcp::endpoint> admin) const;
  // c with its port-0 endpoints resolved from what is bound now (a bug if one is missing).
  std::shared_ptr<const config> with_bound_ports(const config& c, std::optional<tcp::endpoint> admin) const;
  void write_ports_file() const;
  // The running listeners and generation, as the admin dashboard lists them.
  void publish_listeners();
  // [limits] threads > 1: the extra io_context threads VLESS sessions are spread over.
  void start_workers(unsigned threads);
  void stop_workers();
  asio::io_context& session_context();  // round robin over io_ and the workers

  struct worker {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
    std::thread thread;
  };

  asio::io_context io_{1};  // listeners, signals, reload, drain, the target, and sessions too
  std::vector<std::unique_ptr<worker>> workers_;
  std::size_t next_context_ = 0;
  runtime rt_;
  target::target_context target_{rt_.log, rt_.routes, rt_.connections, rt_.stopping, [this] { return rt_.cfg->limits; },
                                 rt_.hub};
  std::vector<std::uint16_t> own_udp_ports() const;
  std::optional<std::filesystem::path> config_file_;
  std::optional<std::filesystem::path> ports_file_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::vector<std::shared_ptr<listener>> listeners_;
  netem::installer netem_;
  std::vector<std::shared_ptr<target::udp_echo_target>> udp_targets_;
  std::vector<std::shared_ptr<target::dns_responder>> dns_;
  asio::signal_set signals_;
  admin::admin_server admin_{io_, admin::admin_context{rt_.hub,
                                                       [this](hub_snapshot& s) {
                                                         s.open_sessions = rt_.vless_sessions.load();
                                                         s.open_connections = rt_.connections.size();
                                                         const auto c = rt_.log.counters();
                                                         s.log_dropped_rate = c.rate_dropped_lines;
                                                         s.log_dropped_session_rate = c.session_rate_dropped_lines;
                                                         s.log_dropped_queue = c.dropped_lines - c.rate_dropped_lines -
                                                                               c.session_rate_dropped_lines;
                                                       },
                                                       [this] { return rt_.cfg; }, VLESSBENCH_VERSION}};
  // A descriptor held in reserve: out of descriptors, it is given up for a moment so a pending
  // connection can be accepted and closed at once instead of waiting in the backlog.
  int spare_fd_ = -1;
  std::uint64_t shed_count_ = 0;  // connections shed that way since the last warning
  std::chrono::steady_clock::time_point last_shed_warning_{};
  std::uint64_t evicted_count_ = 0;  // pending connections evicted since the last warning
  std::chrono::steady_clock::time_point last_evict_warning_{};
};

}  // namespace vlessbench
