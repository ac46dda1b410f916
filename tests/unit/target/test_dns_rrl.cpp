#include <catch2/catch.hpp>

#include <chrono>

#include "target/dns_rrl.hpp"

using namespace vlessbench;
using namespace vlessbench::target;
using namespace std::chrono_literals;

namespace {
asio::ip::address addr(const char* text) { return asio::ip::make_address(text); }
struct tally {
  int answer = 0, slip = 0, drop = 0;
  void add(rrl_action a) {
    if (a == rrl_action::answer)
      ++answer;
    else if (a == rrl_action::slip)
      ++slip;
    else
      ++drop;
  }
};
}  // namespace

TEST_CASE("dns rrl: a burst of the budget, then the rate, and every slip-th limited answer slips", "[dns_rrl]") {
  response_rate_limiter rrl;
  const rrl_settings s{.responses_per_second = 10, .slip = 2, .window = 1000ms};
  const auto t0 = response_rate_limiter::clock::time_point{} + 100s;
  tally t;
  for (int i = 0; i < 30; ++i) t.add(rrl.check(addr("192.0.2.7"), s, t0));
  CHECK(t.answer == 10);  // the burst: rate x window
  CHECK(t.slip == 10);
  CHECK(t.drop == 10);
  // Half a second later: 5 more.
  tally later;
  for (int i = 0; i < 20; ++i) later.add(rrl.check(addr("192.0.2.200"), s, t0 + 500ms));  // the same /24
  CHECK(later.answer == 5);
  CHECK(later.slip + later.drop == 15);
}

TEST_CASE("dns rrl: prefixes are /24 and /56, each with its own budget", "[dns_rrl]") {
  response_rate_limiter rrl;
  const rrl_settings s{.responses_per_second = 3, .slip = 0, .window = 1000ms};
  const auto t0 = response_rate_limiter::clock::time_point{} + 100s;
  for (int i = 0; i < 3; ++i) CHECK(rrl.check(addr("198.51.100.1"), s, t0) == rrl_action::answer);
  CHECK(rrl.check(addr("198.51.100.99"), s, t0) == rrl_action::drop);        // slip 0: all dropped
  CHECK(rrl.check(addr("198.51.101.1"), s, t0) == rrl_action::answer);       // another /24
  CHECK(rrl.check(addr("::ffff:198.51.100.5"), s, t0) == rrl_action::drop);  // v4-mapped is the v4 prefix
  for (int i = 0; i < 3; ++i) CHECK(rrl.check(addr("2001:db8:0:1ff::1"), s, t0) == rrl_action::answer);
  CHECK(rrl.check(addr("2001:db8:0:100::2"), s, t0) == rrl_action::drop);  // the same /56
  CHECK(rrl.check(addr("2001:db8:0:200::2"), s, t0) == rrl_action::answer);
  CHECK(response_rate_limiter::prefix_text(addr("198.51.100.77")) == "198.51.100.0/24");
  CHECK(response_rate_limiter::prefix_text(addr("::ffff:198.51.100.77")) == "198.51.100.0/24");
  CHECK(response_rate_limiter::prefix_text(addr("2001:db8:0:1ff::1")) == "2001:db8:0:100::/56");
}

TEST_CASE("dns rrl: slip 1 truncates every limited answer, and 0 per second is off", "[dns_rrl]") {
  response_rate_limiter rrl;
  const auto t0 = response_rate_limiter::clock::time_point{} + 100s;
  const rrl_settings one{.responses_per_second = 1, .slip = 1, .window = 1000ms};
  CHECK(rrl.check(addr("203.0.113.1"), one, t0) == rrl_action::answer);
  for (int i = 0; i < 5; ++i) CHECK(rrl.check(addr("203.0.113.1"), one, t0) == rrl_action::slip);
  const rrl_settings off{.responses_per_second = 0, .slip = 2, .window = 1000ms};
  for (int i = 0; i < 100; ++i) CHECK(rrl.check(addr("203.0.113.1"), off, t0) == rrl_action::answer);
}

TEST_CASE("dns rrl: the window sets the burst, and a lower limit after a reload takes at once", "[dns_rrl]") {
  response_rate_limiter rrl;
  const auto t0 = response_rate_limiter::clock::time_point{} + 100s;
  const rrl_settings wide{.responses_per_second = 10, .slip = 0, .window = 3000ms};
  tally t;
  for (int i = 0; i < 50; ++i) t.add(rrl.check(addr("192.0.2.1"), wide, t0));
  CHECK(t.answer == 30);
  // Quiet for the window: the full burst again.
  tally again;
  for (int i = 0; i < 50; ++i) again.add(rrl.check(addr("192.0.2.1"), wide, t0 + 3s));
  CHECK(again.answer == 30);
  const rrl_settings narrow{.responses_per_second = 2, .slip = 0, .window = 1000ms};
  tally lower;
  for (int i = 0; i < 10; ++i) lower.add(rrl.check(addr("192.0.2.9"), narrow, t0 + 100s));
  CHECK(lower.answer == 2);
}

TEST_CASE("dns rrl: a flood of forged prefixes holds a bounded table", "[dns_rrl]") {
  response_rate_limiter rrl;
  const auto t0 = response_rate_limiter::clock::time_point{} + 100s;
  const rrl_settings s{.responses_per_second = 5, .slip = 2, .window = 1000ms};
  for (std::uint32_t i = 0; i < 3 * response_rate_limiter::max_prefixes; ++i) {
    const asio::ip::address_v4 a((10u << 24) | (i << 8));
    CHECK(rrl.check(a, s, t0) == rrl_action::answer);  // each a new /24 with its own budget
    CHECK(rrl.tracked() <= response_rate_limiter::max_prefixes);
  }
}
