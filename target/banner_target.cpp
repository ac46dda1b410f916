#include "target/banner_target.hpp"

#include <memory>
#include <string>

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "core/net/policy_stream.hpp"
#include "core/wire/route_header.hpp"
#include "core/net/watchdog.hpp"

namespace vlessbench::target {
namespace {

constexpr std::size_t echo_chunk = 16 * 1024;
// A VLESS session registers its upstream connection right after connect()
// completes, which on one io_context can run just after our accept: the lookup
// yields this many times to let it.
constexpr int route_yields = 4;
constexpr int route_waits = 50;  // then up to 50 x 100 µs while a dial is in flight
constexpr auto route_wait_step = std::chrono::microseconds(100);

std::int64_t us_since(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - t).count();
}

struct banner_connection {
  target_context& ctx;
  std::shared_ptr<listener_runtime> listener;
  policy_stream stream;
  std::string peer;
  flow_id id;
  pending_set::ticket pending;
  steady_clock::time_point accepted = steady_clock::now();
  watchdog_deadline deadline;
  std::shared_ptr<const route_info> route;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::optional<std::int64_t> banner_us;
  std::string_view close_reason = "peer_eof";
  bool writing = false;
  bool draining = false;

  limits_config limits() const { return ctx.limits(); }

  void close() {
    std::error_code ignored;
    stream.socket().close(ignored);
  }

  // A write must finish within min_rate_window when the rate rule is on (16 KiB
  // per window is above any sensible min_rate_bytes), else within idle_timeout;
  // a read waits idle_timeout, or the pending deadline while the peer has sent
  // nothing.
  void arm(bool for_write) {
    const auto l = limits();
    const auto now = steady_clock::now();
    writing = for_write;
    if (for_write && l.min_rate_bytes > 0) {
      deadline = now + std::min(l.min_rate_window, l.idle_timeout);
    } else if (pending.pending()) {
      deadline = std::min(now + l.idle_timeout, accepted + l.pending_timeout);
    } else {
      deadline = now + l.idle_timeout;
    }
  }

  void on_deadline() {
    if (writing)
      close_reason = limits().min_rate_bytes > 0 ? "slow_transfer" : "idle_timeout";
    else
      close_reason = pending.pending() ? "pending_timeout" : "idle_timeout";
    close();
  }

  awaitable<bool> write(const char* data, std::size_t n) {
    arm(true);
    auto [ec, sent] = co_await asio::async_write(stream, asio::buffer(data, n), as_tuple_awaitable);
    bytes_out += sent;
    writing = false;
    if (ec && close_reason == "peer_eof") close_reason = draining ? "drain" : "write_error";
    co_return !ec;
  }

  awaitable<void> run() {
    for (int i = 0; i < route_yields && !route; ++i) {
      route = ctx.routes.find(id);
      if (!route) co_await asio::post(stream.get_executor(), asio::use_awaitable);
    }
    if (!route) route = ctx.routes.find(id);
    // A session on another thread ([limits] threads > 1) may not have run since its connect
    // completed: wait while any dial is in flight, bounded. With none, the connection is direct.
    asio::steady_timer pause(stream.get_executor());
    for (int i = 0; !route && i < route_waits && ctx.routes.dials_in_flight() > 0; ++i) {
      pause.expires_after(route_wait_step);
      co_await pause.async_wait(as_tuple_awaitable);
      route = ctx.routes.find(id);
    }
    const std::string banner = format_banner_line(listener->name, route.get());
    if (!co_await write(banner.data(), banner.size())) co_return;
    banner_us = us_since(accepted);
    const std::unique_ptr<char[]> buf(new char[echo_chunk]);
    for (;;) {
      if (ctx.stopping) {
        close_reason = "drain";
        co_return;
      }
      arm(false);
      auto [ec, n] = co_await stream.async_read_some(asio::buffer(buf.get(), echo_chunk), as_tuple_awaitable);
      if (ec) {
        if (ec != asio::error::eof && close_reason == "peer_eof")
          close_reason = draining ? "drain" : ec == asio::error::operation_aborted ? "closed" : "read_error";
        co_return;
      }
      pending.leave();  // the peer spoke: no longer a silent connection
      bytes_in += n;
      if (!co_await write(buf.get(), n)) co_return;
    }
  }
};

}  // namespace

awaitable<void> serve_banner(target_context& ctx, std::shared_ptr<listener_runtime> listener, tcp::socket socket,
                             tcp::endpoint peer_ep, pending_set::ticket pending) {
  std::error_code ec;
  const auto local_ep = socket.local_endpoint(ec);
  if (ec) co_return;
  if (auto err = apply_on_open(socket.native_handle(), listener->tcp.load()))
    spdlog::warn("banner {}: setsockopt: {}", listener->name, err.message());
  banner_connection c{ctx,
                      listener,
                      policy_stream(std::move(socket), &listener->tcp),
                      format_endpoint(peer_ep),
                      flow_id::tcp(peer_ep, local_ep),
                      std::move(pending)};
  if (!c.pending.arm([&c] {
        c.close_reason = "evicted";
        c.close();
      }))
    co_return;
  {
    const connection_registration registered(ctx.connections, c.stream.get_executor(), [&c](bool) {
      c.draining = true;
      c.close();
    });
    c.arm(false);
    co_await (c.run() || watchdog(c.deadline, [&c] { c.on_deadline(); }));
    c.close();
  }
  c.pending.leave();
  ctx.events().emit(banner_connection_event{.listener = listener->name,
                                            .peer = c.peer,
                                            .route = c.route.get(),
                                            .bytes_in = c.bytes_in,
                                            .bytes_out = c.bytes_out,
                                            .banner_us = c.banner_us,
                                            .duration_us = us_since(c.accepted),
                                            .close_reason = c.close_reason});
}

}  // namespace vlessbench::target
