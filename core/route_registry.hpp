#pragma once
// Route proof (DESIGN.md §3): VLESS sessions register the local endpoint of every upstream
// connection they dial; the target looks up the peer of each accepted connection here and so
// tells a relayed request (which session, user, client) from one that arrived directly.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <asio/ip/tcp.hpp>

namespace vlessbench {

// Microseconds since accept; -1 = not reached. The session's thread writes it while the target,
// perhaps on another thread, reads it: a relaxed atomic (each value stands alone).
class phase_us {
 public:
  phase_us() = default;
  phase_us(const phase_us& o) : v_(o.get()) {}
  phase_us& operator=(const phase_us& o) { return *this = o.get(); }
  phase_us& operator=(std::int64_t v) {
    v_.store(v, std::memory_order_relaxed);
    return *this;
  }
  std::int64_t get() const { return v_.load(std::memory_order_relaxed); }
  operator std::int64_t() const { return get(); }  // NOLINT(google-explicit-constructor): reads like a number

 private:
  std::atomic<std::int64_t> v_{-1};
};

struct session_phases {
  phase_us tls_done;
  phase_us first_vless_byte;
  phase_us header_complete;
  phase_us resolved;
  phase_us upstream_connected;
  phase_us first_upstream_byte;
  phase_us first_client_byte;  // first byte written back to the client
  phase_us closed;
};

// One VLESS session as the target sees it. The session owns it and updates the phases; the
// registry and the target only read. Everything but the phases is set before registration.
struct route_info {
  std::uint64_t session_id = 0;
  std::string user;
  std::string client;    // original client address "ip:port"
  std::string listener;  // VLESS listener name
  session_phases phases;
};

// W3C Server-Timing value for a session's phases: "tls;dur=1.234, vless;dur=0.050, ..." (ms).
std::string server_timing(const session_phases& p);

class route_registry {
 public:
  void add(const asio::ip::tcp::endpoint& upstream_local, std::shared_ptr<const route_info> info);
  void remove(const asio::ip::tcp::endpoint& upstream_local);
  std::shared_ptr<const route_info> find(const asio::ip::tcp::endpoint& peer) const;
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return routes_.size();
  }

 private:
  struct endpoint_hash {
    std::size_t operator()(const asio::ip::tcp::endpoint& ep) const noexcept;
  };
  mutable std::mutex mutex_;  // sessions on worker threads register; the target looks up
  std::unordered_map<asio::ip::tcp::endpoint, std::shared_ptr<const route_info>, endpoint_hash> routes_;
};

// Registers an upstream endpoint for the lifetime of this object.
class route_registration {
 public:
  route_registration(route_registry& registry, const asio::ip::tcp::endpoint& local,
                     std::shared_ptr<const route_info> info)
      : registry_(registry), local_(local) {
    registry_.add(local_, std::move(info));
  }
  ~route_registration() { registry_.remove(local_); }
  route_registration(const route_registration&) = delete;
  route_registration& operator=(const route_registration&) = delete;

 private:
  route_registry& registry_;
  asio::ip::tcp::endpoint local_;
};

}  // namespace vlessbench
