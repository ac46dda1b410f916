#pragma once
// Admission of connections that have not proved anything yet: a VLESS connection until its header
// is authorised, a target connection until its first request head is complete. They have their
// own bound, so that silent or slow peers can never take the capacity (session slots,
// descriptors) of authenticated sessions: at the cap, a new connection closes the OLDEST pending
// one. A good client finishes its TLS handshake and header within a few round trips and so is
// always among the newest; to lock it out, an attacker has to open more than the cap within that
// time, a flood, instead of holding a few silent connections (refusing new ones instead would
// hand the daemon to whoever connects first). docs/configuration.md ([limits] max_pending).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "core/net/asio_compat.hpp"

namespace vlessbench {

// The pending cap in force: max_pending, but never more than half the descriptor limit, so that
// pending connections alone can never exhaust the descriptors authenticated sessions need.
// nofile: the soft RLIMIT_NOFILE (RLIM_INFINITY: no descriptor bound).
inline std::size_t pending_cap(std::size_t max_pending, rlim_t nofile) {
  if (nofile == RLIM_INFINITY) return std::max<std::size_t>(max_pending, 1);
  return std::max<std::size_t>(1, std::min<std::size_t>(max_pending, static_cast<std::size_t>(nofile / 2)));
}

// The soft RLIMIT_NOFILE now (prlimit may change it while the daemon runs).
inline rlim_t nofile_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return RLIM_INFINITY;
  return r.rlim_cur;
}

// Thread-safe: connections are admitted on the main thread and leave on their own. An eviction
// runs the connection's closer on the connection's executor, so it never races the connection.
class pending_set {
 public:
  using closer = std::function<void()>;

  // A connection's place in the set, from accept until it leaves (admitted or ended).
  class ticket {
   public:
    ticket() = default;
    ticket(ticket&& o) noexcept : set_(std::exchange(o.set_, nullptr)), id_(o.id_) {}
    ticket& operator=(ticket&& o) noexcept {
      if (this != &o) {
        leave();
        set_ = std::exchange(o.set_, nullptr);
        id_ = o.id_;
      }
      return *this;
    }
    ticket(const ticket&) = delete;
    ticket& operator=(const ticket&) = delete;
    ~ticket() { leave(); }

    // On the connection's executor, once it can be closed: the closer an eviction runs there.
    // false: it was evicted before it got here, so it should close at once.
    bool arm(closer c) { return set_ == nullptr || set_->arm(id_, std::move(c)); }
    // Admitted (or ended): no longer pending, never evicted from now on.
    void leave() {
      if (set_ != nullptr) std::exchange(set_, nullptr)->leave(id_);
    }
    bool pending() const { return set_ != nullptr; }

   private:
    friend class pending_set;
    ticket(pending_set* s, std::uint64_t id) : set_(s), id_(id) {}
    pending_set* set_ = nullptr;
    std::uint64_t id_ = 0;
  };

  // At accept: adds a connection running on ex. With cap connections pending already, the oldest
  // ones are evicted first (their closers posted to their executors); evicted counts them.
  ticket admit(const asio::any_io_executor& ex, std::size_t cap, std::size_t* evicted = nullptr) {
    const std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (auto it = entries_.begin(); live_ >= cap && it != entries_.end(); ++it) {
      if (it->second.evicted) continue;
      it->second.evicted = true;
      --live_;
      ++n;
      asio::post(it->second.executor, [this, id = it->first] { fire(id); });
    }
    evicted_total_ += n;
    if (evicted != nullptr) *evicted = n;
    const auto id = next_++;
    entries_.emplace(id, entry{ex, {}, false});
    ++live_;
    return ticket(this, id);
  }

  std::size_t size() const {  // pending and not evicted
    const std::lock_guard lock(mutex_);
    return live_;
  }
  std::uint64_t evicted_total() const {
    const std::lock_guard lock(mutex_);
    return evicted_total_;
  }

 private:
  struct entry {
    asio::any_io_executor executor;
    closer close;
    bool evicted = false;
  };

  bool arm(std::uint64_t id, closer c) {
    const std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.evicted) return false;
    it->second.close = std::move(c);
    return true;
  }
  void leave(std::uint64_t id) {
    const std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    if (!it->second.evicted) --live_;
    entries_.erase(it);
  }
  // On the connection's executor: still in the set means still pending (it leaves on this same
  // executor), so its frame is alive. Not armed yet: arm() reports the eviction instead.
  void fire(std::uint64_t id) {
    closer c;
    {
      const std::lock_guard lock(mutex_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return;
      c = it->second.close;
    }
    if (c) c();
  }

  mutable std::mutex mutex_;
  std::uint64_t next_ = 1;
  std::size_t live_ = 0;
  std::uint64_t evicted_total_ = 0;
  std::map<std::uint64_t, entry> entries_;  // ordered by accept: begin() is the oldest
};

}  // namespace vlessbench
