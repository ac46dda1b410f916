#pragma once
// State the daemon's parts share while it runs. With [limits] threads = 1 everything runs on one
// io_context thread; with more, VLESS sessions run on worker threads too, so what they share with
// the main thread (listeners, log, routes, connection set, counters) is locked or atomic, and the
// rest (the config, the listener's name) is copied into the session when it is accepted.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/access_log.hpp"
#include "core/asio_compat.hpp"
#include "core/config.hpp"
#include "core/live_config.hpp"
#include "core/pending_set.hpp"
#include "core/route_registry.hpp"
#include "core/socket_policy.hpp"

namespace vlessbench {

// A listener's settings as open connections see them: a reload updates the object in place, so
// a connection picks the new policy up at its next read. Only the policies are read off the main
// thread; name, generation and closed are the main thread's.
struct listener_runtime {
  std::string name;
  std::string kind;  // "vless" or "target"
  asio::ip::tcp::endpoint endpoint;
  shared_tcp_policy tcp;
  shared_tcp_policy upstream_tcp;
  std::uint64_t generation = 0;
  bool closed = false;
};

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

struct runtime {
  std::shared_ptr<const config> cfg;  // main thread only: a session copies it at accept
  live_config live;                   // thread-safe: what sessions admit users and destinations by
  std::uint64_t generation = 1;       // main thread only
  access_log log;                     // thread-safe
  route_registry routes;              // thread-safe
  connection_set connections;         // thread-safe
  pending_set pending;                // thread-safe: connections not yet admitted ([limits] max_pending)
  std::atomic<std::uint64_t> next_session_id{1};
  std::atomic<std::size_t> vless_sessions{0};  // authorised sessions ([limits] max_sessions)
  std::atomic<bool> stopping{false};
};

}  // namespace vlessbench
