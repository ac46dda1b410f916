#pragma once
// The minimum-rate rule for data a relay writes towards a peer ([limits] min_rate_bytes per
// min_rate_window_ms): while a write waits on the peer, the peer must take (acknowledge) that many
// bytes per window. Pure: the caller samples, once per window, whether a write is waiting and the
// peer's cumulative acknowledged bytes (TCP_INFO tcpi_bytes_acked). The peer's progress is read
// from the kernel, not from write completions: a socket becomes writable again only once a large
// part of its send buffer is free, which for a legitimately slow reader can take many windows.
#include <cstdint>

namespace vlessbench {

class delivery_watch {
 public:
  // false: a write waited through a whole window and the peer took fewer than need bytes in it.
  bool on_window(bool waiting, std::uint64_t acked, std::uint64_t need) {
    if (!waiting) {
      armed_ = false;  // nothing in flight: idle, not slow
      return true;
    }
    if (armed_ && acked - acked_at_ < need) return false;
    armed_ = true;
    acked_at_ = acked;
    return true;
  }

 private:
  bool armed_ = false;  // a write was waiting at the previous sample too
  std::uint64_t acked_at_ = 0;
};

}  // namespace vlessbench
