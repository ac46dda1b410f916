#pragma once
// What one client may hold (docs/configuration.md [limits] max_*_per_client / _per_connection): a
// source address's authorised sessions, upstream connections and buffered bytes across every VLESS
// listener, and one client TCP connection's upstream connections (all of a gRPC connection's
// streams share it). The daemon takes a connection's budget at accept and hands it to its
// sessions in session_start; each upstream socket (a session's, a Mux.Cool sub-connection's, a UDP
// destination's) holds a slot of it while open. Counters only, no sockets: thread-safe (sessions
// of one address run on several io_context threads), each counter bounded by a compare-and-swap.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/net/asio_compat.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench {

// A counter taken up to a bound and given back by the holder's destructor.
class bounded_count {
 public:
  class hold {
   public:
    hold() = default;
    hold(hold&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
    hold& operator=(hold&& o) noexcept {
      if (this != &o) {
        release();
        n_ = std::exchange(o.n_, nullptr);
      }
      return *this;
    }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() { release(); }
    void release() {
      if (n_ != nullptr) n_->fetch_sub(1);
      n_ = nullptr;
    }

   private:
    friend class bounded_count;
    explicit hold(std::atomic<std::size_t>& n) : n_(&n) {}
    std::atomic<std::size_t>* n_ = nullptr;
  };

  // Empty when max are held already.
  std::optional<hold> try_take(std::size_t max) {
    auto cur = n_.load();
    while (cur < max)
      if (n_.compare_exchange_weak(cur, cur + 1)) return hold(n_);
    return std::nullopt;
  }
  std::size_t value() const { return n_.load(); }

 private:
  std::atomic<std::size_t> n_{0};
};

class client_registry;

// One source address, as long as a connection of it is open.
struct client_share {
  asio::ip::address address;
  bounded_count sessions;                  // authorised VLESS sessions
  bounded_count upstreams;                 // upstream sockets of all its connections
  std::atomic<std::uint64_t> buffered{0};  // bytes its mux sub-connections hold for their destinations
  client_registry* registry = nullptr;
  ~client_share();
};

// One client TCP connection. Holds its address's share alive.
class connection_budget {
 public:
  explicit connection_budget(std::shared_ptr<client_share> client) : client_(std::move(client)) {}

  // An upstream socket's place in the budget: given back when destroyed.
  struct upstream_slot {
    bounded_count::hold connection, client;
  };
  struct upstream_result {
    std::optional<upstream_slot> slot;
    std::string detail;  // when refused: which limit, for vless.reject / vless.sub detail
  };
  upstream_result take_upstream(std::size_t per_connection, std::size_t per_client) {
    upstream_result r;
    auto c = upstreams_.try_take(per_connection);
    if (!c) {
      r.detail = std::to_string(per_connection) +
                 " upstream connections open on this connection "
                 "([limits] max_upstreams_per_connection)";
      return r;
    }
    auto a = client_->upstreams.try_take(per_client);
    if (!a) {
      r.detail = std::to_string(per_client) +
                 " upstream connections open from this address "
                 "([limits] max_upstreams_per_client)";
      return r;
    }
    r.slot.emplace(upstream_slot{std::move(*c), std::move(*a)});
    return r;
  }
  std::size_t upstreams() const { return upstreams_.value(); }

  // Bytes held for destinations (mux queues), counted per address.
  void add_buffered(std::uint64_t n) { client_->buffered.fetch_add(n); }
  void sub_buffered(std::uint64_t n) { client_->buffered.fetch_sub(n); }
  bool over_buffered(std::uint64_t max) const { return client_->buffered.load() > max; }

  client_share& client() { return *client_; }

 private:
  std::shared_ptr<client_share> client_;
  bounded_count upstreams_;
};

// The shares of the addresses with a connection open; an entry goes with its last connection.
class client_registry {
 public:
  std::shared_ptr<connection_budget> connect(const asio::ip::address& a) {
    const auto key = unmapped(a);
    const std::lock_guard lock(mutex_);
    auto& weak = shares_[key];
    auto share = weak.lock();
    if (!share) {
      share = std::make_shared<client_share>();
      share->address = key;
      share->registry = this;
      weak = share;
    }
    return std::make_shared<connection_budget>(std::move(share));
  }
  std::size_t addresses() const {
    const std::lock_guard lock(mutex_);
    return shares_.size();
  }

 private:
  friend struct client_share;
  void gone(const asio::ip::address& a) {
    const std::lock_guard lock(mutex_);
    // A new connection may have replaced the entry since this one expired.
    if (const auto it = shares_.find(a); it != shares_.end() && it->second.expired()) shares_.erase(it);
  }
  struct hash {
    std::size_t operator()(const asio::ip::address& a) const {
      if (a.is_v4()) return std::hash<std::uint32_t>()(a.to_v4().to_uint());
      const auto b = a.to_v6().to_bytes();
      return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
    }
  };
  mutable std::mutex mutex_;
  std::unordered_map<asio::ip::address, std::weak_ptr<client_share>, hash> shares_;
};

inline client_share::~client_share() {
  if (registry != nullptr) registry->gone(address);
}

}  // namespace vlessbench
