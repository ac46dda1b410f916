#pragma once
// State the daemon's parts share while it runs: one io_context thread, so no locks.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "access_log.hpp"
#include "config.hpp"
#include "route_registry.hpp"

namespace vlessbench {

// A listener's settings as open connections see them: a reload updates the object in place, so
// a connection picks the new policy up at its next read.
struct listener_runtime {
  std::string name;
  std::string kind;  // "vless" or "target"
  asio::ip::tcp::endpoint endpoint;
  tcp_policy tcp;
  tcp_policy upstream_tcp;
  std::uint64_t generation = 0;
  bool closed = false;
};

// Open connections, so that a drain can close idle ones at once and the rest at its deadline.
class connection_set {
 public:
  using closer = std::function<void(bool force)>;  // force=false: close only if idle
  std::uint64_t add(closer c) {
    const auto id = next_++;
    entries_.emplace(id, std::move(c));
    return id;
  }
  void remove(std::uint64_t id) { entries_.erase(id); }
  void close_all(bool force) {
    // Closers may remove entries (directly or later); iterate over a copy of the keys.
    std::vector<std::uint64_t> ids;
    ids.reserve(entries_.size());
    for (auto& [id, c] : entries_) ids.push_back(id);
    for (auto id : ids)
      if (auto it = entries_.find(id); it != entries_.end()) it->second(force);
  }
  std::size_t size() const { return entries_.size(); }

 private:
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, closer> entries_;
};

// Keeps a connection in a connection_set for its scope. A closer refers to the connection's
// frame, so it must leave the set however that frame ends, an unexpected exception included.
class connection_registration {
 public:
  connection_registration(connection_set& set, connection_set::closer c)
      : set_(set), id_(set.add(std::move(c))) {}
  ~connection_registration() { set_.remove(id_); }
  connection_registration(const connection_registration&) = delete;
  connection_registration& operator=(const connection_registration&) = delete;

 private:
  connection_set& set_;
  std::uint64_t id_;
};

struct runtime {
  std::shared_ptr<const config> cfg;
  std::uint64_t generation = 1;
  access_log log;
  route_registry routes;
  connection_set connections;
  std::uint64_t next_session_id = 1;
  std::size_t vless_sessions = 0;
  bool stopping = false;
};

}  // namespace vlessbench
