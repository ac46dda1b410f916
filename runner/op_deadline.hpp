#pragma once
// The runner's one operation deadline (tunnel, datagram_tunnel): a single timer that wakes at the
// deadline, while operations only move the deadline (a store), so a sample that finishes in time
// costs no timer work inside the measured interval. When the clock passes it, the owner's expire
// closes what the owner holds; its pending operations then end with an error, which describe()
// names with the phase that was running ("open: timeout after 5000 ms").
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "core/net/asio_compat.hpp"

namespace vlessbench::runner {

class op_deadline {
 public:
  using clock = std::chrono::steady_clock;

  op_deadline(asio::any_io_executor ex, std::chrono::milliseconds timeout) : timer_(ex), timeout_(timeout) {}

  // Starts the watch for the operations that follow (call it before a sample's clock starts);
  // each operation then has `timeout` from its start (touch). expire(Owner&) runs on the
  // executor once the deadline has passed, unless the owner is gone or disarm() came first.
  template <class Owner, class Expire>
  void arm(std::weak_ptr<Owner> owner, Expire expire) {
    deadline_ = clock::now() + timeout_;
    watch(std::move(owner), std::move(expire));
  }
  void disarm() {
    deadline_ = clock::time_point::max();
    timer_.cancel();
  }
  // An operation begins: it is named phase and gets its own timeout (when armed).
  void touch(const char* phase) {
    phase_ = phase;
    if (deadline_ != clock::time_point::max()) deadline_ = clock::now() + timeout_;
  }
  bool timed_out() const { return timed_out_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The reason for an I/O error of the running phase: "PHASE: timeout after N ms" once the
  // deadline closed the owner's sockets, "PHASE: connection closed by peer" (EOF, a TLS stream
  // cut), else "PHASE: " and the error's message.
  std::string describe(const std::error_code& ec) const;

 private:
  template <class Owner, class Expire>
  void watch(std::weak_ptr<Owner> owner, Expire expire) {
    timer_.expires_at(deadline_);
    timer_.async_wait([this, owner = std::move(owner), expire = std::move(expire)](std::error_code ec) mutable {
      const auto self = owner.lock();  // first: `this` lives inside the owner
      if (!self || ec == asio::error::operation_aborted) return;
      if (deadline_ == clock::time_point::max()) return;
      if (clock::now() >= deadline_) {
        timed_out_ = true;
        expire(*self);
      } else {
        watch(std::move(owner), std::move(expire));
      }
    });
  }

  asio::steady_timer timer_;
  std::chrono::milliseconds timeout_;
  clock::time_point deadline_ = clock::time_point::max();
  const char* phase_ = "idle";
  bool timed_out_ = false;
};

}  // namespace vlessbench::runner
