#pragma once
// Applies a tcp_policy to a socket: TCP_NODELAY once, TCP_QUICKACK after accept/connect and again
// after every read (Linux clears it; see tcp(7)). Non-Linux builds keep only TCP_NODELAY.
#include <atomic>
#include <cstdint>
#include <system_error>

#include "core/net/tcp_policy.hpp"

namespace vlessbench {

// A tcp_policy that a reload replaces while connections on other threads read it: packed into
// one atomic word (std::atomic<tcp_policy> would need libatomic under clang).
class shared_tcp_policy {
 public:
  explicit shared_tcp_policy(tcp_policy p = {}) : bits_(pack(p)) {}
  tcp_policy load() const { return unpack(bits_.load(std::memory_order_relaxed)); }
  shared_tcp_policy& operator=(const tcp_policy& p) {
    bits_.store(pack(p), std::memory_order_relaxed);
    return *this;
  }

 private:
  static std::uint32_t pack(const tcp_policy& p) {
    return (p.nodelay ? 1U : 0U) | (static_cast<std::uint32_t>(p.quickack) << 1U);
  }
  static tcp_policy unpack(std::uint32_t b) { return tcp_policy{(b & 1U) != 0, static_cast<quickack_mode>(b >> 1U)}; }
  std::atomic<std::uint32_t> bits_;
};

// Returns the first error of setsockopt (the socket stays usable; callers log it).
std::error_code apply_on_open(int fd, const tcp_policy& p);
// Called after each completed read; a no-op for quickack = kernel.
void apply_after_read(int fd, const tcp_policy& p);

}  // namespace vlessbench
