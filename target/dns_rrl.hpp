#pragma once
// DNS response rate limiting for the [[dns]] responder's UDP answers (docs/target.md "No
// amplifier"), as authoritative servers do it (BIND's rate-limit, Knot's rrl module): answers to one
// source prefix (/24 for IPv4, /56 for IPv6) are limited to responses_per_second, with a burst of
// responses_per_second x window; past it every slip-th limited answer is sent truncated (TC=1, no
// records, never longer than the query: a real resolver retries over TCP, which is not limited) and
// the others are dropped. A flood with a forged source so reflects at most the budget, and a victim
// gets no more than that. Pure: the caller passes the time; one responder's thread uses it.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/net/asio_compat.hpp"

namespace vlessbench::target {

struct rrl_settings {
  std::uint32_t responses_per_second = 0;   // 0: no limit
  std::uint32_t slip = 2;                   // every slip-th limited answer truncated; 0: all dropped
  std::chrono::milliseconds window{1'000};  // the burst: responses_per_second x window / 1 s
};

enum class rrl_action { answer, slip, drop };

class response_rate_limiter {
 public:
  using clock = std::chrono::steady_clock;
  // Prefixes tracked at once; past it the ones idle longest are forgotten (a flood from forged
  // sources can cost no more memory than this).
  static constexpr std::size_t max_prefixes = 16'384;

  rrl_action check(const asio::ip::address& source, const rrl_settings& s, clock::time_point now);
  // "192.0.2.0/24", "2001:db8:0:100::/56": the prefix an address is accounted under.
  static std::string prefix_text(const asio::ip::address& source);
  std::size_t tracked() const { return accounts_.size(); }

 private:
  using key = std::array<std::uint8_t, 8>;  // family byte, then the prefix's bytes
  struct account {
    double credit = 0;
    clock::time_point last{};
    std::uint64_t limited = 0;  // limited answers, for the slip count
  };
  static key key_of(const asio::ip::address& source);
  void make_room(clock::time_point now, const rrl_settings& s);
  std::map<key, account> accounts_;
};

}  // namespace vlessbench::target
