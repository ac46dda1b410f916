#pragma once
// Route proof (DESIGN.md §3): VLESS sessions register the local endpoint of every upstream
// connection they dial; the target looks up the peer of each accepted connection here and so
// tells a relayed request (which session, user, client) from one that arrived directly.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <asio/ip/tcp.hpp>

namespace vlessbench {

// Microseconds since accept; -1 = not reached.
struct session_phases {
  std::int64_t tls_done = -1;
  std::int64_t first_vless_byte = -1;
  std::int64_t header_complete = -1;
  std::int64_t resolved = -1;
  std::int64_t upstream_connected = -1;
  std::int64_t first_upstream_byte = -1;
  std::int64_t first_client_byte = -1;  // first byte written back to the client
  std::int64_t closed = -1;
};

// One VLESS session as the target sees it. The session owns it and updates the phases; the
// registry and the target only read (one io_context thread).
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
  std::size_t size() const { return routes_.size(); }

 private:
  struct endpoint_hash {
    std::size_t operator()(const asio::ip::tcp::endpoint& ep) const noexcept;
  };
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
