// target/rate_gate.hpp: the token bucket behind [limits] probe_results_per_minute.
#include <catch2/catch.hpp>

#include <chrono>

#include "target/rate_gate.hpp"

using namespace vlessbench;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
int taken(token_bucket& b, std::chrono::steady_clock::time_point at, std::uint32_t per_minute, int tries) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += b.take(at, per_minute) ? 1 : 0;
  return n;
}
}  // namespace

TEST_CASE("token bucket: a minute's burst, then the rate", "[rate_gate]") {
  token_bucket b;
  const auto t0 = std::chrono::steady_clock::time_point{} + seconds(1000);
  CHECK(taken(b, t0, 60, 100) == 60);                   // the burst
  CHECK(taken(b, t0 + milliseconds(500), 60, 5) == 0);  // half a token back
  CHECK(taken(b, t0 + seconds(1), 60, 5) == 1);         // one a second
  CHECK(taken(b, t0 + seconds(11), 60, 20) == 10);
  CHECK(taken(b, t0 + seconds(3600), 60, 100) == 60);  // refills to the burst, never beyond
}

TEST_CASE("token bucket: zero refuses, a lowered rate caps what was saved, time going back is ignored", "[rate_gate]") {
  token_bucket b;
  const auto t0 = std::chrono::steady_clock::time_point{} + seconds(1000);
  CHECK_FALSE(b.take(t0, 0));
  CHECK(taken(b, t0, 10, 3) == 3);               // 7 left of 10
  CHECK(taken(b, t0, 2, 5) == 2);                // a reload to 2/min: at most 2 saved
  CHECK(taken(b, t0 - seconds(60), 2, 5) == 0);  // an earlier clock reading refills nothing
  CHECK(taken(b, t0 + seconds(30), 2, 5) == 1);
}

TEST_CASE("rate gate: shared, the same arithmetic", "[rate_gate]") {
  rate_gate g;
  const auto t0 = std::chrono::steady_clock::time_point{} + seconds(5);
  int n = 0;
  for (int i = 0; i < 10; ++i) n += g.take(t0, 4) ? 1 : 0;
  CHECK(n == 4);
}
