// A client's budget (server/client_budget.hpp) and the refusal tally (core/log/refusal_tally.hpp).
#include <catch2/catch.hpp>

#include "server/client_budget.hpp"
#include "core/log/refusal_tally.hpp"

using namespace vlessbench;

TEST_CASE("client budget: upstreams per connection and per address, given back when released", "[budget]") {
  client_registry reg;
  const auto a = asio::ip::make_address("127.0.0.1");
  auto c1 = reg.connect(a);
  auto c2 = reg.connect(asio::ip::make_address("::ffff:127.0.0.1"));  // the same address, mapped
  CHECK(reg.addresses() == 1);
  auto s1 = c1->take_upstream(2, 3);
  auto s2 = c1->take_upstream(2, 3);
  REQUIRE(s1.slot);
  REQUIRE(s2.slot);
  const auto s3 = c1->take_upstream(2, 3);
  CHECK(!s3.slot);
  CHECK(s3.detail.find("max_upstreams_per_connection") != std::string::npos);
  auto s4 = c2->take_upstream(2, 3);
  REQUIRE(s4.slot);
  const auto s5 = c2->take_upstream(2, 3);
  CHECK(!s5.slot);
  CHECK(s5.detail.find("max_upstreams_per_client") != std::string::npos);
  s1.slot.reset();
  CHECK(c2->take_upstream(2, 3).slot);
  c1->add_buffered(100);
  CHECK(c2->over_buffered(99));
  c1->sub_buffered(100);
  CHECK(!c2->over_buffered(99));
  s2.slot.reset();
  s4.slot.reset();
  c1.reset();
  c2.reset();
  CHECK(reg.addresses() == 0);
}

TEST_CASE("refusal tally: one report per reason per second, with the count", "[budget]") {
  refusal_tally t;
  const auto t0 = refusal_tally::clock::now();
  const auto first = t.note("unknown_user", "a", t0);
  REQUIRE(first);
  CHECK(first->count == 1);
  for (int i = 0; i < 49; ++i) CHECK(!t.note("unknown_user", "b", t0 + std::chrono::milliseconds(i)));
  CHECK(t.note("flow_unsupported", "c", t0));  // another reason has its own second
  CHECK(t.due(t0 + std::chrono::milliseconds(500)).empty());
  const auto due = t.due(t0 + std::chrono::seconds(1));
  REQUIRE(due.size() == 1);
  CHECK(due[0].reason == "unknown_user");
  CHECK(due[0].count == 49);
  CHECK(due[0].sample == "b");
  CHECK(t.due(t0 + std::chrono::seconds(3)).empty());
  CHECK(t.note("unknown_user", "d", t0 + std::chrono::seconds(3)));  // quiet for a second: at once again
}
