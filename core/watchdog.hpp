#pragma once
// Deadline watchdog (after Asio's cpp20 timeout_watchdog example): the session moves `deadline`
// forward as it progresses; when the clock passes it, on_expire runs (it closes the sockets, which
// ends the session's pending operations). Run as `co_await (work() || watchdog(...))`.
#include <chrono>

#include "asio_compat.hpp"

namespace vlessbench {

using steady_clock = std::chrono::steady_clock;

template <class OnExpire>
awaitable<void> watchdog(const steady_clock::time_point& deadline, OnExpire on_expire) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto now = steady_clock::now();
  while (deadline > now) {
    timer.expires_at(deadline);
    auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
    if (ec) co_return;  // cancelled: the work finished first
    now = steady_clock::now();
  }
  on_expire();
}

}  // namespace vlessbench
