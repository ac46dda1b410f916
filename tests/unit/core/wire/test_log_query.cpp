// GET /api/log's query (core/wire/log_query.hpp): the runner formats it, the admin listener parses
// it and selects access-log lines with it.
#include <catch2/catch.hpp>

#include <string>

#include "core/wire/log_query.hpp"

using namespace vlessbench;

namespace {

std::string refusal(std::string_view query) {
  INFO(std::string(query));
  const auto r = parse_log_query(query);
  REQUIRE(r.invalid());
  return std::string(r.reason);
}

}  // namespace

TEST_CASE("parse_log_query takes a run id and skips the admin token", "[log_query]") {
  const auto r = parse_log_query("run=3f2a9c01beef&token=secret%2B1");
  REQUIRE(r.complete());
  CHECK(r.value.run == "3f2a9c01beef");
  CHECK(r.value.events.empty());
  CHECK(r.value.since.empty());
}

TEST_CASE("parse_log_query takes label-less events with since, and round-trips with format_log_query", "[log_query]") {
  const auto r = parse_log_query("run=ab12&events=udp.packet,dns.query,udp.packet&since=2026-12-02T03:40:00Z");
  REQUIRE(r.complete());
  CHECK(r.value.run == "ab12");
  CHECK(r.value.events == std::vector<std::string>{"udp.packet", "dns.query"});
  CHECK(r.value.since == "2026-12-02T03:40:00Z");
  const auto again = parse_log_query(format_log_query(r.value));
  REQUIRE(again.complete());
  CHECK(again.value.run == r.value.run);
  CHECK(again.value.events == r.value.events);
  CHECK(again.value.since == r.value.since);
  CHECK(format_log_query(r.value) == "run=ab12&events=udp.packet,dns.query&since=2026-12-02T03:40:00Z");
}

TEST_CASE("parse_log_query refuses what it cannot select by, saying why", "[log_query]") {
  CHECK(refusal("") == "run=ID is required");
  CHECK(refusal("token=x") == "run=ID is required");
  CHECK(refusal("run=") == "run must be a run id: 1 to 64 of A-Z a-z 0-9 . _ -");
  CHECK(refusal("run=a%22b") == "run must be a run id: 1 to 64 of A-Z a-z 0-9 . _ -");
  CHECK(refusal("run=" + std::string(65, 'a')) == "run must be a run id: 1 to 64 of A-Z a-z 0-9 . _ -");
  CHECK(refusal("run=a&run=b") == "run given twice");
  CHECK(refusal("run=a&events=http.request&since=2026-12-02T03:40:00Z") ==
        "events: only banner.connection, udp.packet, dns.query");
  CHECK(refusal("run=a&events=udp.packet") == "events and since go together");
  CHECK(refusal("run=a&since=2026-12-02T03:40:00Z") == "events and since go together");
  CHECK(refusal("run=a&events=udp.packet&since=2026-12-02 03:40:00") ==
        "since must be a UTC second: YYYY-MM-DDTHH:MM:SSZ");
  CHECK(refusal("run=a&limit=5") == "unknown parameter (run, events, since, token)");
  CHECK(refusal("run") == "a parameter without '='");
}

TEST_CASE("log_line_selected picks the run's lines by their exact run value", "[log_query]") {
  log_query q;
  q.run = "ab12";
  CHECK(log_line_selected(q, R"({"event":"http.request","ts":"2026-12-02T03:40:01.000001Z","run":"ab12","seq":"3"})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"http.request","ts":"2026-12-02T03:40:01.000001Z","run":"ab123"})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"http.request","ts":"2026-12-02T03:40:01.000001Z","run":"xab12"})"));
  // A hostile value that spells the key inside another field arrives escaped: never a match.
  CHECK_FALSE(
      log_line_selected(q, R"({"event":"http.request","ts":"2026-12-02T03:40:01Z","path":"\"run\":\"ab12\""})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"udp.packet","ts":"2026-12-02T03:40:01.000001Z"})"));
}

TEST_CASE("log_line_selected picks label-less events from since on, to the second", "[log_query]") {
  log_query q;
  q.run = "ab12";
  q.events = {"udp.packet"};
  q.since = "2026-12-02T03:40:00Z";
  CHECK(log_line_selected(q, R"({"event":"udp.packet","ts":"2026-12-02T03:40:00.000001Z","packets_in":3})"));
  CHECK(log_line_selected(q, R"({"event":"udp.packet","ts":"2026-12-02T04:00:00.5Z"})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"udp.packet","ts":"2026-12-02T03:39:59.999999Z"})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"dns.query","ts":"2026-12-02T03:40:01.000001Z"})"));
  CHECK_FALSE(log_line_selected(q, R"({"event":"udp.packet"})"));
  CHECK_FALSE(log_line_selected(q, R"({"ts":"2026-12-02T03:40:01Z","event":"udp.packet"})"));
  CHECK_FALSE(log_line_selected(q, "not json"));
}
