#pragma once
// A token bucket shared by the connections of the daemon (one per kind of thing it limits: the
// probe's result posts). Holds `per_minute` tokens at most and refills per_minute / 60 a second,
// so a burst of a minute's worth passes and a flood is held to the rate. The rate is passed on
// each take (the running config's, which a reload may change). Thread-safe: VLESS sessions and
// targets run on several io_context threads ([limits] threads).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace vlessbench {

class token_bucket {
 public:
  // true: a token was taken. per_minute 0 lets nothing through.
  bool take(std::chrono::steady_clock::time_point now, std::uint32_t per_minute) {
    if (per_minute == 0) return false;
    const double capacity = per_minute;
    if (!started_) {
      tokens_ = capacity;
      started_ = true;
    } else if (now > last_) {
      const double seconds = std::chrono::duration<double>(now - last_).count();
      tokens_ = std::min(capacity, tokens_ + seconds * capacity / 60.0);
    }
    tokens_ = std::min(tokens_, capacity);  // a reload that lowered the rate
    last_ = std::max(last_, now);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

 private:
  double tokens_ = 0;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_{};
};

class rate_gate {
 public:
  bool take(std::chrono::steady_clock::time_point now, std::uint32_t per_minute) {
    const std::lock_guard lock(mutex_);
    return bucket_.take(now, per_minute);
  }

 private:
  std::mutex mutex_;
  token_bucket bucket_;
};

}  // namespace vlessbench
