#pragma once
// Route proof (DESIGN.md §3): VLESS sessions register the identity of every upstream connection
// they dial; a target looks up each accepted connection here and so tells a relayed request
// (which session, user, client) from one that arrived directly.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <asio/ip/tcp.hpp>
#include <asio/ip/udp.hpp>

#include "core/wire/net_address.hpp"
#include "core/wire/session_info.hpp"

namespace vlessbench {

// A connection's identity as both of its ends see it, in one normal form (net_address.hpp: an
// IPv4-mapped address is the IPv4 address). The dialling side calls its local endpoint `from` and
// its remote one `to`; the accepting side sees the same pair as (peer, local). The kernel never
// gives two live connections of one protocol the same pair, while it does let connections to
// different destinations share a local port: a key of `from` alone is not an identity.
struct flow_id {
  enum class protocol : std::uint8_t { tcp, udp };
  protocol proto = protocol::tcp;
  asio::ip::address from_address;
  unsigned short from_port = 0;
  asio::ip::address to_address;
  unsigned short to_port = 0;

  static flow_id tcp(const asio::ip::tcp::endpoint& from, const asio::ip::tcp::endpoint& to);
  // A connected UDP socket: its local and remote endpoints; a datagram's receiver sees (source, own).
  static flow_id udp(const asio::ip::udp::endpoint& from, const asio::ip::udp::endpoint& to);
  bool operator==(const flow_id&) const = default;
};
std::string to_string(const flow_id& id);  // "tcp 127.0.0.1:40000->127.0.0.1:8080"

// Route proof (DESIGN.md §3, docs/sessions.md): a VLESS session registers the identity of every
// upstream connection it dials, before it sends a byte on it, and removes it before it closes the
// socket; a target looks up the identity of each accepted connection. An entry belongs to the
// route_info it was added with: only that owner removes it, and a second add of a live identity
// is refused, so one session can never take or erase another's entry.
class route_registry {
 public:
  // False (and nothing changes) when id is registered already.
  bool add(const flow_id& id, std::shared_ptr<const route_info> owner);
  // Removes id if owner still holds it; another owner's entry stays.
  void remove(const flow_id& id, const route_info* owner);
  std::shared_ptr<const route_info> find(const flow_id& id) const;
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return routes_.size();
  }

  // Dials in flight: sessions between starting connect() and registering its result (or giving
  // up). The kernel completes a handshake, and a target may accept it, before the dialling session
  // has run: a target that must name the route before the peer sends anything (the banner) waits,
  // bounded, while this is non-zero; a direct connection, with no dial in flight, waits not at all.
  class dial {
   public:
    explicit dial(route_registry& r) : r_(r) { r_.dialing_.fetch_add(1, std::memory_order_acq_rel); }
    ~dial() { r_.dialing_.fetch_sub(1, std::memory_order_acq_rel); }
    dial(const dial&) = delete;
    dial& operator=(const dial&) = delete;

   private:
    route_registry& r_;
  };
  std::size_t dials_in_flight() const { return dialing_.load(std::memory_order_acquire); }

 private:
  struct flow_hash {
    std::size_t operator()(const flow_id& id) const noexcept;
  };
  mutable std::mutex mutex_;  // sessions on worker threads register; the target looks up
  std::unordered_map<flow_id, std::shared_ptr<const route_info>, flow_hash> routes_;
  std::atomic<std::size_t> dialing_{0};
};

// Holds one registration for its lifetime (or until release()). owned() is false when the
// identity was registered by someone else: the caller must not use the connection as proven.
class route_registration {
 public:
  route_registration(route_registry& registry, const flow_id& id, std::shared_ptr<const route_info> info)
      : registry_(registry), id_(id), owner_(info.get()), owned_(registry.add(id, std::move(info))) {}
  ~route_registration() { release(); }
  route_registration(const route_registration&) = delete;
  route_registration& operator=(const route_registration&) = delete;
  bool owned() const { return owned_; }
  const flow_id& id() const { return id_; }
  void release() {
    if (owned_) registry_.remove(id_, owner_);
    owned_ = false;
  }

 private:
  route_registry& registry_;
  flow_id id_;
  const route_info* owner_;
  bool owned_;
};

}  // namespace vlessbench
