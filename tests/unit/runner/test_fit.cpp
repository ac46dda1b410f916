#include <catch2/catch.hpp>

#include "runner/fit.hpp"
#include "runner/report.hpp"

using namespace vlessbench::runner;
namespace stats = vlessbench::stats;

namespace {

const char* const uuid = "b831381d-6324-4d53-ad4f-8cda48b30811";

path_spec vless_path(const std::string& name, const std::string& query) {
  std::string reason;
  auto p = parse_path_arg(name + "=vless://" + uuid + "@127.0.0.1:8445?" + query + "#" + name, reason);
  REQUIRE(p);
  return *p;
}

// A new-connection sample through the daemon: total ms, the server's VLESS-header wait and the
// RTT the runner measured on its connection.
sample vless_sample(const std::string& path, int round, double ms, double vless_ms, double rtt_ms) {
  sample s;
  s.path = path;
  s.mode = sample_mode::new_connection;
  s.round = round;
  s.seq = static_cast<std::uint64_t>(round) + 1;
  s.ns = static_cast<std::int64_t>(ms * 1e6);
  s.ok = true;
  s.status = 200;
  s.route.kind = vlessbench::route_kind::vless;
  s.route.session = static_cast<std::uint64_t>(round) * 100 + path.size();
  s.timing.tls = 2 * rtt_ms;
  s.timing.vless = vless_ms;
  s.timing.upstream = 0.1;
  s.rtt_ms = rtt_ms;
  return s;
}

}  // namespace

TEST_CASE("t quantile: the table's values and the expansion beyond it", "[runner][fit]") {
  CHECK(stats::t_quantile_975(1) == Approx(12.706));
  CHECK(stats::t_quantile_975(4) == Approx(2.776));
  CHECK(stats::t_quantile_975(30) == Approx(2.042));
  CHECK(stats::t_quantile_975(40) == Approx(2.021).margin(0.001));
  CHECK(stats::t_quantile_975(120) == Approx(1.980).margin(0.001));
  CHECK(stats::t_quantile_975(100000) == Approx(1.960).margin(0.001));
}

TEST_CASE("least squares line: slope, intercept and their 95% intervals by hand", "[runner][fit]") {
  // Two distances, three samples each: slope (86 - 6) / 40 = 2, intercept 6; residuals -1, 0, 1
  // twice: s^2 = 4 / 4 = 1, Sxx = 6 x 20^2 = 2400, t(4) = 2.776.
  const std::vector<double> x{0, 0, 0, 40, 40, 40}, y{5, 6, 7, 85, 86, 87};
  const auto f = stats::fit_line(x, y);
  REQUIRE(f);
  CHECK(f->n == 6);
  CHECK(f->slope == Approx(2));
  CHECK(f->intercept == Approx(6));
  CHECK(f->slope_ci.low == Approx(2 - 2.776 * std::sqrt(1.0 / 2400)));
  CHECK(f->slope_ci.high == Approx(2 + 2.776 * std::sqrt(1.0 / 2400)));
  CHECK(f->intercept_ci.low == Approx(6 - 2.776 * std::sqrt(1.0 / 3)));
  CHECK(f->intercept_ci.high == Approx(6 + 2.776 * std::sqrt(1.0 / 3)));
  CHECK(f->r2 > 0.99);

  // An exact line has a zero-width interval.
  const std::vector<double> ex{1, 2, 3}, ey{5, 7, 9};
  const auto e = stats::fit_line(ex, ey);
  REQUIRE(e);
  CHECK(e->slope == Approx(2));
  CHECK(e->intercept == Approx(3));
  CHECK(e->slope_ci.high - e->slope_ci.low == Approx(0).margin(1e-9));

  // Nothing to fit: fewer than 3 points, or one distance only.
  CHECK_FALSE(stats::fit_line(std::vector<double>{0, 40}, std::vector<double>{1, 81}));
  CHECK_FALSE(stats::fit_line(std::vector<double>{5, 5, 5}, std::vector<double>{1, 2, 3}));
}

TEST_CASE("round trips per request: a family at two RTTs is fitted, one at a single RTT is not", "[runner][fit]") {
  std::vector<rtt_point> points;
  for (int i = 0; i < 10; ++i) {
    const double jitter = (i % 3) * 0.1;
    points.push_back({0.05, 40 + 3 * 0.05 + jitter});  // a Nagle stall of 40 ms, 3 round trips
    points.push_back({40.05, 40 + 3 * 40.05 + jitter});
  }
  const std::vector<double> rtts{0.05, 40.05};
  const auto r = fit_round_trips("vless ws no-early-data", {"ws", "ws40"}, points, rtts);
  REQUIRE(r.fit);
  CHECK(r.fit->slope == Approx(3).margin(0.01));
  CHECK(r.fit->intercept == Approx(40.1).margin(0.1));
  CHECK(r.fit->slope_ci.low <= 3);
  CHECK(r.fit->slope_ci.high >= 3);
  CHECK_THAT(r.text, Catch::Contains("k 3.00 round trips") && Catch::Contains("fixed 40.09"));

  const std::vector<double> one{0.05, 0.06};
  const auto none = fit_round_trips("vless tls", {"a", "b"}, points, one);
  CHECK_FALSE(none.fit);
  CHECK_THAT(none.text, Catch::Contains("no fit") && Catch::Contains("emulate.delay_ms"));
  const auto alone = fit_round_trips("vless tls", {"a"}, points, rtts);
  CHECK_FALSE(alone.fit);
}

TEST_CASE("analyze fits the paths that differ only in RTT, and prints k and fixed", "[runner][fit]") {
  std::vector<path_spec> paths{path_spec{}, vless_path("tls", "security=tls&type=tcp"),
                               vless_path("tls40", "security=tls&type=tcp"),
                               vless_path("ws", "security=tls&type=ws&path=%2Fws")};
  paths[0].name = "direct";
  paths[0].spec = "direct";
  std::vector<sample> samples;
  for (int r = 0; r < 8; ++r) {
    // Raw TLS 1.3: TCP + TLS + request = 3 round trips, 1 ms of work.
    samples.push_back(vless_sample("tls", r, 1 + 3 * 0.05 + 0.01 * r, 0.05, 0.05));
    samples.push_back(vless_sample("tls40", r, 1 + 3 * 40.0 + 0.01 * r, 0.05, 40.0));
    samples.push_back(vless_sample("ws", r, 1 + 4 * 0.05, 0.06, 0.05));
  }
  const auto results = analyze(paths, 0, samples, {}, 1);
  REQUIRE(results[1].round_trips);
  REQUIRE(results[1].round_trips->fit);
  CHECK(results[1].round_trips->fit->slope == Approx(3).margin(0.01));
  CHECK(results[1].round_trips->fit->intercept == Approx(1.035).margin(0.01));
  CHECK(results[2].round_trips->family == results[1].round_trips->family);
  CHECK(*results[2].rtt_ms == Approx(40));
  REQUIRE(results[3].round_trips);  // ws is a family of its own, at one RTT: no fit
  CHECK_FALSE(results[3].round_trips->fit);
  const auto table = format_table(results);
  CHECK_THAT(table, Catch::Contains("round trips per new request") && Catch::Contains("(tls, tls40): k 3.00"));
  CHECK_THAT(summary_json({}, results), Catch::Contains("\"k\": 3.0") && Catch::Contains("\"fixed_ms\""));
}

TEST_CASE("a run at one distance (loopback) says no fit once, with why", "[runner][fit]") {
  const std::vector<path_spec> paths{vless_path("tls", "security=tls&type=tcp"),
                                     vless_path("ws", "security=tls&type=ws&path=%2Fws"),
                                     vless_path("grpc", "security=tls&type=grpc&serviceName=g")};
  std::vector<sample> samples;
  for (int r = 0; r < 4; ++r)
    for (const auto* name : {"tls", "ws", "grpc"}) samples.push_back(vless_sample(name, r, 1.5, 0.05, 0.05 + 0.01 * r));
  const auto table = format_table(analyze(paths, 0, samples, {}, 1));
  std::size_t lines = 0;
  for (auto at = table.find("no fit"); at != std::string::npos; at = table.find("no fit", at + 1)) ++lines;
  CHECK(lines == 1);
  CHECK_THAT(table, Catch::Contains("RTT spread 0.00 ms < 1.00 ms") && Catch::Contains("emulate.delay_ms"));

  // One family fitted, another at one RTT: the fit's line, and one line naming the other.
  std::vector<path_spec> two = paths;
  two.push_back(vless_path("tls40", "security=tls&type=tcp"));
  for (int r = 0; r < 4; ++r) samples.push_back(vless_sample("tls40", r, 121.5 + 0.01 * r, 0.05, 40.0));
  const auto mixed = format_table(analyze(two, 0, samples, {}, 1));
  CHECK_THAT(mixed, Catch::Contains("(tls, tls40): k 3.0"));
  CHECK_THAT(mixed, Catch::Contains("no fit for vless ws no-early-data, vless grpc:"));
}

TEST_CASE("stall verdict on a long path: ws without early data waits one RTT for its header", "[runner][fit]") {
  const auto ws = vless_path("ws80", "security=tls&type=ws&path=%2Fws");
  const auto ws_ed = vless_path("ed80", "security=tls&type=ws&path=%2Fws&ed=2048");
  const auto wait = header_wait_of(ws);
  CHECK(wait.round_trips == 1);
  CHECK(header_wait_of(ws_ed).round_trips == 0);
  CHECK(header_wait_of(vless_path("t", "security=tls&type=tcp")).round_trips == 0);
  CHECK(header_wait_of(vless_path("hu", "security=tls&type=httpupgrade&path=%2Fhu")).round_trips == 1);

  // An 80 ms path: the server's wait from the 101 to the header is the round trip, 80.4 ms.
  std::vector<sample> samples;
  for (int r = 0; r < 20; ++r) samples.push_back(vless_sample("ws80", r, 330, 80.4 + 0.01 * r, 80.0));
  const auto judged = judge_stall(samples, wait);
  CHECK(judged.verdict == stall_verdict::kind::none);
  CHECK(judged.rtts_subtracted == 1);
  CHECK(*judged.rtt_subtracted_ms == Approx(80));
  CHECK_THAT(judged.text, Catch::StartsWith("no stall") && Catch::Contains("less 1 measured RTT") &&
                              Catch::Contains("ws without early data"));
  // Without the transport's round trip taken off, the same samples read as a stall.
  CHECK(judge_stall(samples).verdict == stall_verdict::kind::stall);
  // A Nagle stall on top of the round trip still shows.
  std::vector<sample> nagle;
  for (int r = 0; r < 20; ++r) nagle.push_back(vless_sample("ws80", r, 370, 80.4 + 40, 80.0));
  CHECK(judge_stall(nagle, wait).verdict == stall_verdict::kind::stall);
}

TEST_CASE("stall verdict on a long path: a Nagle-prone client waits one RTT for the ACK even with QUICKACK",
          "[runner][fit]") {
  // Seen in the qemu guest at 50 ms: the QUICKACK listener ACKs at once, the ACK still takes the
  // round trip to reach the client, whose held write follows it.
  const auto raw = vless_path("far", "security=tls&type=tcp");
  const auto wait = header_wait_of(raw, {}, vless_client_options{false, write_mode::split});
  CHECK(wait.round_trips == 1);
  CHECK_THAT(wait.why, Catch::Contains("Nagle"));
  CHECK(header_wait_of(raw, {}, vless_client_options{}).round_trips == 0);
  std::vector<sample> quick, delayed;
  for (int r = 0; r < 20; ++r) {
    quick.push_back(vless_sample("far", r, 260, 51.4, 51.1));
    delayed.push_back(vless_sample("far", r, 300, 51.1 + 43.4, 51.1));
  }
  CHECK(judge_stall(quick, wait).verdict == stall_verdict::kind::none);
  CHECK(judge_stall(quick).verdict == stall_verdict::kind::stall);  // the round trip read as a stall
  // The delayed ACK on top of the round trip is still the stall.
  CHECK(judge_stall(delayed, wait).verdict == stall_verdict::kind::stall);
}
