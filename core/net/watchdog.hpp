#pragma once
// Deadline watchdog (after Asio's cpp20 timeout_watchdog example): the session moves its
// watchdog_deadline as it progresses; when the clock passes it, on_expire runs (it closes the
// sockets, which ends the session's pending operations). Run as `co_await (work() || watchdog(...))`.
// An on_expire that returns bool may look and decide: false means "not over", and it has moved
// the deadline later (a periodic check riding on the same timer); true, the watchdog ends.
#include <chrono>
#include <type_traits>

#include "core/net/asio_compat.hpp"

namespace vlessbench {

using steady_clock = std::chrono::steady_clock;

// Assigning a later time is just a store; assigning an earlier one (a keep-alive connection's
// idle deadline replaced by the shorter header deadline once a request starts) wakes the watchdog,
// which would otherwise sleep until the old, later deadline.
class watchdog_deadline {
 public:
  watchdog_deadline& operator=(steady_clock::time_point t) {
    at_ = t;
    if (timer_ != nullptr && t < armed_) {
      moved_earlier_ = true;
      timer_->cancel();
    }
    return *this;
  }
  steady_clock::time_point at() const { return at_; }

 private:
  template <class OnExpire>
  friend awaitable<void> watchdog(watchdog_deadline& deadline, OnExpire on_expire);

  steady_clock::time_point at_{};
  steady_clock::time_point armed_{};     // what the watchdog's timer waits for
  asio::steady_timer* timer_ = nullptr;  // set while a watchdog runs
  bool moved_earlier_ = false;
};

template <class OnExpire>
awaitable<void> watchdog(watchdog_deadline& deadline, OnExpire on_expire) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  struct unhook {
    watchdog_deadline& d;
    ~unhook() { d.timer_ = nullptr; }
  } guard{deadline};
  deadline.timer_ = &timer;
  for (;;) {
    auto now = steady_clock::now();
    while (deadline.at_ > now) {
      deadline.armed_ = deadline.at_;
      deadline.moved_earlier_ = false;
      timer.expires_at(deadline.at_);
      auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
      if (ec) {
        // Cancelled: either the work finished first (the || operator cancels us), or the deadline
        // moved earlier and the timer has to be re-armed.
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none || !deadline.moved_earlier_) co_return;
      }
      now = steady_clock::now();
    }
    if constexpr (std::is_same_v<std::invoke_result_t<OnExpire&>, bool>) {
      if (on_expire()) co_return;
    } else {
      on_expire();
      co_return;
    }
  }
}

}  // namespace vlessbench
