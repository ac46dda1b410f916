#pragma once
// The set of open connections a drain closes; thread-safe (connections run on several threads).
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/net/asio_compat.hpp"

namespace vlessbench {

// Open connections, so that a drain can close idle ones at once and the rest at its deadline.
// Connections live on different threads: a closer always runs on its connection's executor, so
// it never races the connection's own coroutine.
class connection_set {
 public:
  using closer = std::function<void(bool force)>;  // force=false: close only if idle
  std::uint64_t add(asio::any_io_executor ex, closer c) {
    const std::lock_guard lock(mutex_);
    const auto id = next_++;
    entries_.emplace(id, entry{std::move(ex), std::move(c)});
    return id;
  }
  void remove(std::uint64_t id) {
    const std::lock_guard lock(mutex_);
    entries_.erase(id);
  }
  // Posts every closer to its connection's executor; one that left the set meanwhile is skipped.
  void close_all(bool force) {
    std::vector<std::pair<std::uint64_t, asio::any_io_executor>> todo;
    {
      const std::lock_guard lock(mutex_);
      todo.reserve(entries_.size());
      for (auto& [id, e] : entries_) todo.emplace_back(id, e.executor);
    }
    for (auto& [id, ex] : todo) asio::post(ex, [this, id = id, force] { call(id, force); });
  }
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct entry {
    asio::any_io_executor executor;
    closer close;
  };
  // On the connection's thread: it cannot end between the lookup and the call. The closer runs
  // unlocked, as it may remove entries.
  void call(std::uint64_t id, bool force) {
    closer c;
    {
      const std::lock_guard lock(mutex_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return;
      c = it->second.close;
    }
    c(force);
  }
  mutable std::mutex mutex_;
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, entry> entries_;
};

// Keeps a connection in a connection_set for its scope. A closer refers to the connection's
// frame, so it must leave the set however that frame ends, an unexpected exception included.
class connection_registration {
 public:
  connection_registration(connection_set& set, asio::any_io_executor ex, connection_set::closer c)
      : set_(set), id_(set.add(std::move(ex), std::move(c))) {}
  ~connection_registration() { set_.remove(id_); }
  connection_registration(const connection_registration&) = delete;
  connection_registration& operator=(const connection_registration&) = delete;

 private:
  connection_set& set_;
  std::uint64_t id_;
};

}  // namespace vlessbench
