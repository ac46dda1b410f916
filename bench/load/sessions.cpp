// vlessbench_load sessions: many concurrent VLESS+TLS sessions against vlessbenchd, for the load
// and fault tests (tests/integration/test_load.py, test_faults.py, test_threads.py via
// tests/load/loadkit.py), the soak script (tests/load/soak.sh) and bench/run.py's RSS phase.
//
// Two kinds of sessions, both opened by the core VLESS client: TCP connect, TLS handshake,
// VLESS header + first GET in one write, VLESS response header + HTTP response read (with
// --tls-server the same without the VLESS header: a bare TLS terminator, HAProxy in bench/run.py).
//   --idle N    then hold the session open without traffic (watching for the server closing it)
//               until stdin reaches EOF or --hold seconds pass.
//   --active N  then keep sending GETs on it (keep-alive), --requests each or until --duration;
//               --reconnect-every K opens a fresh session every K requests.
// One line of JSON goes to stdout when every idle session is open ("ready"), one at the end
// ("done") with counts, errors by reason and latency quantiles. Exit 0 when nothing failed.
//
// One io_context on one thread: the daemon gets the other core of a two-core machine.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/wire/http_parser.hpp"
#include "load.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/quantile.hpp"
#include "core/net/watchdog.hpp"

namespace vlessbench::load {
namespace {

struct counters {
  std::uint64_t opened = 0;
  std::uint64_t open_failed = 0;
  std::uint64_t requests_ok = 0;
  std::uint64_t requests_failed = 0;
  std::uint64_t dropped = 0;           // idle sessions the server closed while held
  std::uint64_t closed_by_server = 0;  // Connection: close or EOF at a request boundary
  std::map<std::string, std::uint64_t> errors;
  std::vector<double> open_ms;
  std::vector<double> request_ms;
};

double ms_since(clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); }

// -1: no samples (the JSON keeps its shape).
double quantile_ms(const std::vector<double>& v, double q) { return stats::quantile(v, q).value_or(-1); }

// Limits on openings in flight, so the daemon's accept backlog is not what gets measured. A
// freed slot passes straight to the longest waiter.
class gate {
 public:
  gate(asio::any_io_executor ex, int slots) : ex_(std::move(ex)), free_(slots) {}
  awaitable<void> enter() {
    if (free_ > 0) {
      --free_;
      co_return;
    }
    auto t = std::make_shared<asio::steady_timer>(ex_, clock::time_point::max());
    waiters_.push_back(t);
    co_await t->async_wait(as_tuple_awaitable);
  }
  void leave() {
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    waiters_.front()->cancel();
    waiters_.pop_front();
  }

 private:
  asio::any_io_executor ex_;
  int free_;
  std::deque<std::shared_ptr<asio::steady_timer>> waiters_;
};

struct shared_state {
  session_options opt;
  asio::io_context& io;
  vless::client_plan client;
  std::string request;  // the GET
  gate opening;
  counters c;
  bool releasing = false;  // idle sessions: the test asked us to let go
  int idle_open = 0;
  int idle_settled = 0;  // opened or failed
  clock::time_point active_until = clock::time_point::max();
  std::vector<std::weak_ptr<struct session>> idle_sessions;

  void error(const std::string& what) { ++c.errors[what]; }
};

enum class step { ok, failed, closed };

struct session : std::enable_shared_from_this<session> {
  shared_state& st;
  tcp::socket socket;
  vless::client client;
  watchdog_deadline deadline;
  std::string in;
  std::vector<char> scratch = std::vector<char>(16 * 1024);
  std::string failure;
  bool timed_out = false;

  explicit session(shared_state& s) : st(s), socket(s.io), client(socket, s.client) {}

  void close() {
    std::error_code ignored;
    socket.close(ignored);
  }
  void touch() { deadline = clock::now() + std::chrono::milliseconds(static_cast<long>(st.opt.timeout_s * 1000)); }
  std::string describe(std::string_view phase, const std::error_code& ec) const {
    if (timed_out) return std::string(phase) + ": timeout";
    if (ec.category() == vless::client_category()) return "bad VLESS response";
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return std::string(phase) + ": eof";
    return std::string(phase) + ": " + ec.message();
  }

  // Reads one HTTP response (the client takes the VLESS response header off the first bytes).
  // closed: the server ended the session cleanly before a response began.
  awaitable<step> read_response(bool first, bool& keep_alive) {
    for (;;) {
      if (!in.empty()) {
        const auto h = http::parse_response(in);
        if (h.invalid()) {
          failure = "bad HTTP response: " + std::string(h.reason);
          co_return step::failed;
        }
        if (h.complete()) {
          const std::uint64_t body = h.value.content_length.value_or(0);
          if (in.size() >= h.consumed + body) {
            in.erase(0, h.consumed + body);
            keep_alive = h.value.keep_alive;
            if (h.value.status / 100 != 2) {
              failure = fmt::format("status {}", h.value.status);
              co_return step::failed;
            }
            co_return step::ok;
          }
        }
      }
      touch();
      std::size_t n = 0;
      if (const auto ec = co_await client.read_some(scratch.data(), scratch.size(), n)) {
        const bool boundary = in.empty() && !client.response_pending();
        if (boundary && !first && !timed_out) co_return step::closed;
        failure = describe("response", ec);
        co_return step::failed;
      }
      in.append(scratch.data(), n);
    }
  }

  awaitable<step> exchange(bool first, bool& keep_alive) {
    const auto t0 = clock::now();
    touch();
    // The first request carries the VLESS header in the same write.
    if (const auto ec = co_await client.write(st.request)) {
      if (!first && !timed_out && (ec == asio::error::broken_pipe || ec == asio::error::connection_reset))
        co_return step::closed;
      failure = describe("write", ec);
      co_return step::failed;
    }
    const auto r = co_await read_response(first, keep_alive);
    if (r == step::ok) st.c.request_ms.push_back(ms_since(t0));
    co_return r;
  }

  // TCP connect, TLS handshake, header + first GET.
  awaitable<bool> open(bool& keep_alive) {
    const auto t0 = clock::now();
    touch();
    bool ok = false;
    if (const auto cec = co_await client.connect()) {
      failure = describe("connect", cec);
    } else {
      if (const auto hec = co_await client.handshake()) {
        failure = describe("tls", hec);
      } else {
        const auto r = co_await exchange(true, keep_alive);
        ok = r == step::ok;
        if (r == step::closed) failure = "first response: eof";
      }
    }
    if (ok) {
      ++st.c.opened;
      st.c.open_ms.push_back(ms_since(t0));
    } else {
      ++st.c.open_failed;
      st.error(failure);
    }
    co_return ok;
  }

  // The same under the session's deadline watchdog; opening takes a gate slot (not timed).
  awaitable<bool> open_guarded(bool& keep_alive) {
    co_await st.opening.enter();
    bool ok = false;
    touch();
    co_await ([&]() -> awaitable<void> { ok = co_await open(keep_alive); }() ||
                           watchdog(deadline, [this] { expire(); }));
    st.opening.leave();
    co_return ok;
  }
  awaitable<step> exchange_guarded(bool& keep_alive) {
    step r = step::failed;
    touch();
    co_await ([&]() -> awaitable<void> { r = co_await exchange(false, keep_alive); }() ||
                           watchdog(deadline, [this] { expire(); }));
    co_return r;
  }
  void expire() {
    timed_out = true;
    close();
  }
};

awaitable<void> idle_session(shared_state& st, std::shared_ptr<session> s) {
  bool keep_alive = true;
  const bool ok = co_await s->open_guarded(keep_alive);
  ++st.idle_settled;
  if (!ok) co_return;
  ++st.idle_open;
  if (st.releasing) co_return;
  // Hold: any byte or EOF from the server now means it dropped the session.
  std::size_t n = 0;
  const auto ec = co_await s->client.read_some(s->scratch.data(), s->scratch.size(), n);
  if (!st.releasing) {
    ++st.c.dropped;
    st.error(ec ? s->describe("idle", ec) : std::string("idle: unexpected data"));
  }
  s->close();
}

awaitable<void> active_session(shared_state& st, int index) {
  const auto& o = st.opt;
  int done = 0;
  std::shared_ptr<session> s;
  bool keep_alive = false;
  std::uint64_t since_open = 0;
  asio::steady_timer pause(st.io);
  for (;;) {
    if (o.requests > 0 && done >= o.requests) break;
    if (o.requests == 0 && clock::now() >= st.active_until) break;
    const bool fresh =
        !s || !keep_alive || (o.reconnect_every > 0 && since_open >= static_cast<std::uint64_t>(o.reconnect_every));
    if (fresh) {
      if (s) s->close();
      s = std::make_shared<session>(st);
      const bool ok = co_await s->open_guarded(keep_alive);
      ++done;
      since_open = 1;
      if (ok) {
        ++st.c.requests_ok;
      } else {
        ++st.c.requests_failed;
        s.reset();
        if (o.stop_on_close) break;
      }
    } else {
      const step r = co_await s->exchange_guarded(keep_alive);
      if (r == step::closed) {
        // The server ended the session between requests (drain, restart): not a failed request.
        ++st.c.closed_by_server;
        s->close();
        s.reset();
        if (o.stop_on_close) break;
        continue;
      }
      ++done;
      ++since_open;
      if (r == step::ok) {
        ++st.c.requests_ok;
      } else {
        ++st.c.requests_failed;
        st.error(s->failure);
        s->close();
        s.reset();
        if (o.stop_on_close) break;
      }
    }
    if (s && !keep_alive) {
      ++st.c.closed_by_server;
      if (o.stop_on_close) break;
    }
    if (o.pause_ms > 0) {
      pause.expires_after(std::chrono::microseconds(static_cast<long>(o.pause_ms * 1000)));
      co_await pause.async_wait(as_tuple_awaitable);
    }
  }
  (void)index;
  if (s) s->close();
}

awaitable<void> watch_stdin(shared_state& st) {
  // EOF on stdin = the test lets the idle sessions go (works even if the test is killed).
  asio::posix::stream_descriptor in(st.io, ::dup(STDIN_FILENO));
  char b[256];
  for (;;) {
    auto [ec, n] = co_await in.async_read_some(asio::buffer(b), as_tuple_awaitable);
    if (ec) break;
  }
  st.releasing = true;
}

void release_idle(shared_state& st) {
  st.releasing = true;
  for (auto& w : st.idle_sessions)
    if (auto s = w.lock()) s->close();
}

void print_line(const char* event, const shared_state& st, double elapsed_s) {
  const auto& c = st.c;
  std::string errors;
  for (const auto& [k, v] : c.errors)
    errors += fmt::format("{}\"{}\":{}", errors.empty() ? "" : ",", json_escape(k), v);
  fmt::print(
      "{{\"event\":\"{}\",\"opened\":{},\"open_failed\":{},\"idle_open\":{},\"requests_ok\":{},"
      "\"requests_failed\":{},\"dropped\":{},\"closed_by_server\":{},\"elapsed_s\":{:.3f},"
      "\"open_ms\":{{\"p50\":{:.3f},\"p99\":{:.3f},\"max\":{:.3f}}},"
      "\"request_ms\":{{\"p50\":{:.3f},\"p99\":{:.3f},\"max\":{:.3f}}},\"errors\":{{{}}}}}\n",
      event, c.opened, c.open_failed, st.idle_open, c.requests_ok, c.requests_failed, c.dropped, c.closed_by_server,
      elapsed_s, quantile_ms(c.open_ms, 0.5), quantile_ms(c.open_ms, 0.99), quantile_ms(c.open_ms, 1.0),
      quantile_ms(c.request_ms, 0.5), quantile_ms(c.request_ms, 0.99), quantile_ms(c.request_ms, 1.0), errors);
  std::fflush(stdout);
}

// Every session needs a descriptor; raise the soft limit (and the hard one when allowed).
void raise_nofile(rlim_t want) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur >= want) return;
  rlimit next{std::max(want, rl.rlim_cur), std::max(want, rl.rlim_max)};
  if (setrlimit(RLIMIT_NOFILE, &next) != 0) {
    next = {rl.rlim_max, rl.rlim_max};
    setrlimit(RLIMIT_NOFILE, &next);
    std::fprintf(stderr, "vlessbench_load: RLIMIT_NOFILE limited to %llu\n",
                 static_cast<unsigned long long>(rl.rlim_max));
  }
}

}  // namespace

int run_sessions(const session_options& o) {
  tls::client_options tls;
  tls.sni = "localhost";
  auto client = vless_plan(o.where, tls);
  const auto dest = endpoint_arg("--target", o.where.target);
  raise_nofile(static_cast<rlim_t>(o.idle + o.active) + 256);
  std::signal(SIGPIPE, SIG_IGN);

  asio::io_context io(1);
  shared_state st{
      o,
      io,
      std::move(client),
      fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: vlessbench-load\r\n\r\n", o.path, format_endpoint(dest)),
      gate(io.get_executor(), o.opening),
      {},
      false,
      0,
      0,
      clock::time_point::max(),
      {}};
  const auto started = clock::now();
  auto log_exception = [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "vlessbench_load: session: %s\n", ex.what());
      std::abort();  // a bug in this tool: make the test fail loudly
    }
  };

  // Idle sessions first (all of them open before any active traffic starts).
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code ec, int) {
    if (!ec) release_idle(st);
  });
  if (o.idle > 0) {
    st.idle_sessions.reserve(static_cast<std::size_t>(o.idle));
    for (int i = 0; i < o.idle; ++i) {
      auto s = std::make_shared<session>(st);
      st.idle_sessions.push_back(s);
      asio::co_spawn(io, idle_session(st, s), log_exception);
    }
    if (o.hold_s <= 0) asio::co_spawn(io, watch_stdin(st), [&](std::exception_ptr) { release_idle(st); });
  }
  asio::steady_timer ticker(io);
  bool ready_printed = false;
  bool hold_armed = false;
  int active_left = o.active;
  std::function<void()> tick = [&] {
    if (!ready_printed && st.idle_settled >= o.idle) {
      ready_printed = true;
      print_line("ready", st, std::chrono::duration<double>(clock::now() - started).count());
      if (o.active > 0) {
        if (o.duration_s > 0)
          st.active_until = clock::now() + std::chrono::milliseconds(static_cast<long>(o.duration_s * 1000));
        for (int i = 0; i < o.active; ++i)
          asio::co_spawn(io, active_session(st, i), [&](std::exception_ptr e) {
            log_exception(e);
            --active_left;
          });
      }
      if (o.idle > 0 && o.hold_s > 0 && !hold_armed) {
        hold_armed = true;
        auto t =
            std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(static_cast<long>(o.hold_s * 1000)));
        t->async_wait([&st, t](std::error_code) { release_idle(st); });
      }
    }
    const bool idle_done = o.idle == 0 || (ready_printed && st.releasing);
    if (ready_printed && idle_done && active_left <= 0) {
      signals.cancel();
      release_idle(st);
      io.stop();
      return;
    }
    ticker.expires_after(std::chrono::milliseconds(50));
    ticker.async_wait([&](std::error_code) { tick(); });
  };
  tick();
  io.run();
  // Let closed sockets' handlers finish so every idle session counts once.
  io.restart();
  io.run_for(std::chrono::milliseconds(200));
  const double elapsed = std::chrono::duration<double>(clock::now() - started).count();
  print_line("done", st, elapsed);
  const auto& c = st.c;
  return (c.open_failed + c.requests_failed + c.dropped) == 0 ? 0 : 1;
}

}  // namespace vlessbench::load
