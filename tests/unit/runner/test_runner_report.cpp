#include <catch2/catch.hpp>

#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/wire/markup.hpp"
#include "runner/compare.hpp"
#include "runner/report.hpp"
#include "runner/svg_report.hpp"
#include "runner/verify.hpp"

using namespace vlessbench::runner;

namespace {

path_spec make_path(std::string name, path_kind kind) {
  path_spec p;
  p.name = std::move(name);
  p.kind = kind;
  p.spec = kind == path_kind::direct ? "direct" : "http://127.0.0.1:7890";
  return p;
}

sample make_sample(std::string path, sample_mode mode, int round, std::uint64_t seq, double ms, bool ok = true) {
  sample s;
  s.path = std::move(path);
  s.mode = mode;
  s.round = round;
  s.seq = seq;
  s.ns = static_cast<std::int64_t>(ms * 1e6);
  s.ok = ok;
  s.status = ok ? 200 : 0;
  if (!ok) s.error = "connect: Connection refused";
  return s;
}

sample with_vless_phase(double vless_ms, bool ok = true) {
  auto s = make_sample("p", sample_mode::new_connection, 0, 1, 50, ok);
  s.timing.tls = 1.0;
  s.timing.vless = vless_ms;
  s.timing.upstream = 0.1;
  return s;
}

// direct new: 1, 2, 3 ms; proxy new: 11, (failed), 14 ms; proxy reuse 0.5 with route direct.
struct fixture {
  std::vector<path_spec> paths{make_path("direct", path_kind::direct), make_path("proxy", path_kind::http_connect)};
  std::vector<sample> samples;
  fixture() {
    samples.push_back(make_sample("direct", sample_mode::new_connection, 0, 1, 1.0));
    samples.push_back(make_sample("proxy", sample_mode::new_connection, 0, 2, 11.0));
    samples.push_back(make_sample("proxy", sample_mode::new_connection, 1, 3, 0, false));
    samples.push_back(make_sample("direct", sample_mode::new_connection, 1, 4, 2.0));
    samples.push_back(make_sample("direct", sample_mode::new_connection, 2, 5, 3.0));
    samples.push_back(make_sample("proxy", sample_mode::new_connection, 2, 6, 14.0));
    samples.push_back(make_sample("direct", sample_mode::reuse, 0, 7, 0.25));
    auto r = make_sample("proxy", sample_mode::reuse, 0, 8, 0.5);
    r.route.kind = route_kind::direct;
    r.route_mismatch = true;
    samples.push_back(r);
  }
};

}  // namespace

TEST_CASE("analyze: per-mode statistics, failures and paired deltas", "[runner]") {
  fixture f;
  const auto res = analyze(f.paths, 0, f.samples, {}, 1);
  REQUIRE(res.size() == 2);
  const auto& d = res[0];
  const auto& p = res[1];
  CHECK(d.baseline);
  REQUIRE(d.fresh.latency);
  CHECK(d.fresh.latency->median == Approx(2.0));
  CHECK(p.fresh.attempted == 3);
  CHECK(p.fresh.failed == 1);
  CHECK(p.fresh.errors.at("connect: Connection refused") == 1);
  REQUIRE(p.fresh.latency);
  CHECK(p.fresh.latency->n == 2);
  CHECK(p.fresh.latency->median == Approx(12.5));
  // rounds 0 and 2 pair: 11-1 = 10, 14-3 = 11 -> median 10.5 (difference of medians would be 10.5
  // too here only by accident of the data; the pairing itself is checked by the deltas).
  CHECK(p.fresh.paired_deltas == std::vector<double>{10.0, 11.0});
  CHECK(*p.fresh.paired_delta_median == Approx(10.5));
  CHECK(*p.reuse.paired_delta_median == Approx(0.25));
  CHECK(p.route_mismatches == 1);
  CHECK(p.routes.at("direct") == 1);
  CHECK(p.routes.at("unknown") == 2);  // the failed sample had no response: not counted
}

TEST_CASE("stall verdict names packet-up POST spacing instead of a Nagle stall", "[runner][stats][xhttp]") {
  // Xray's packet-up client: the VLESS header's second half waited for the next POST, 40 ms on.
  auto spaced = [](double wait) {
    auto s = with_vless_phase(wait);
    s.timing.tls.reset();
    s.timing.upgrade = 0.1;
    s.timing.xget = 0.1;
    s.timing.xpost = 0.05;
    s.timing.xgaps = 1;
    s.timing.xgap = 40.2;
    s.timing.xgapmax = 40.2;
    return s;
  };
  std::vector<sample> samples{spaced(40.3), spaced(40.4), spaced(40.5), spaced(40.6)};
  const auto v = judge_stall(samples);
  CHECK(v.verdict == stall_verdict::kind::none);
  CHECK(v.stalled == 0);
  CHECK(v.with_timing == 4);
  CHECK(v.spaced == 4);
  CHECK(v.spacing_waits == 4);
  CHECK(*v.post_gap_ms == Approx(40.2));
  CHECK_THAT(v.text, Catch::Contains("packet-up POST spacing") && Catch::Contains("median gap 40.200 ms") &&
                         !Catch::Contains("Nagle meets") && !Catch::Contains("STALL"));

  // The spacing after a header that came whole in the first POST: no header wait, still named.
  std::vector<sample> later{spaced(0.05), spaced(0.06)};
  const auto l = judge_stall(later);
  CHECK(l.verdict == stall_verdict::kind::none);
  CHECK(l.spaced == 2);
  CHECK(l.spacing_waits == 0);
  CHECK_THAT(l.text, Catch::StartsWith("no stall") && Catch::Contains("packet-up POST spacing: 2/2"));

  // The same waits without a POST gap that long are what they were: a stall.
  auto unspaced = samples;
  for (auto& s : unspaced) s.timing.xgap = s.timing.xgapmax = 1.0;
  const auto u = judge_stall(unspaced);
  CHECK(u.verdict == stall_verdict::kind::stall);
  CHECK(u.spaced == 0);
  CHECK_THAT(u.text, !Catch::Contains("POST spacing"));
}

TEST_CASE("stall verdict only when the data shows it", "[runner][stats]") {
  std::vector<sample> none;
  CHECK(judge_stall(none).verdict == stall_verdict::kind::no_data);

  std::vector<sample> no_timing{make_sample("p", sample_mode::new_connection, 0, 1, 5)};
  CHECK(judge_stall(no_timing).verdict == stall_verdict::kind::no_data);

  std::vector<sample> stalled{with_vless_phase(40), with_vless_phase(42), with_vless_phase(0.05), with_vless_phase(45),
                              with_vless_phase(44, false)};
  const auto v = judge_stall(stalled);
  CHECK(v.verdict == stall_verdict::kind::stall);
  CHECK(v.with_timing == 4);  // the failed sample does not count
  CHECK(v.stalled == 3);
  CHECK(v.share == Approx(0.75));
  CHECK(*v.vless_ms == Approx(42));  // median of the stalled ones: the evidence
  CHECK(*v.tls_ms == Approx(1.0));
  CHECK_THAT(v.text, Catch::Contains("3/4") && Catch::Contains("delayed ACK"));
  CHECK_FALSE(v.terminated_in_between);  // the header said nothing of QUICKACK

  // The same stall on a listener that says it has QUICKACK on (Server-Timing ack;desc=on): the
  // daemon's ACKs cannot be what the client waits for, so TCP is terminated in between.
  auto on_quickack = stalled;
  for (auto& s : on_quickack) s.timing.ack = "on";
  const auto q = judge_stall(on_quickack);
  CHECK(q.verdict == stall_verdict::kind::stall);
  CHECK(q.terminated_in_between);
  CHECK_THAT(q.text, Catch::Contains("QUICKACK on") && Catch::Contains("terminates TCP"));
  CHECK_THAT(q.text, !Catch::Contains("Nagle meets delayed ACK"));
  auto on_kernel = stalled;
  for (auto& s : on_kernel) s.timing.ack = "kernel";
  CHECK_FALSE(judge_stall(on_kernel).terminated_in_between);

  std::vector<sample> some(18, with_vless_phase(0.04));
  some.push_back(with_vless_phase(35));
  some.push_back(with_vless_phase(31));
  const auto w = judge_stall(some);
  CHECK(w.verdict == stall_verdict::kind::intermittent);
  CHECK(w.stalled == 2);

  std::vector<sample> one_outlier(99, with_vless_phase(0.04));
  one_outlier.push_back(with_vless_phase(31));
  const auto x = judge_stall(one_outlier);
  CHECK(x.verdict == stall_verdict::kind::none);
  CHECK(*x.max_vless_ms == Approx(31));

  std::vector<sample> just_below(10, with_vless_phase(29.999));
  CHECK(judge_stall(just_below).verdict == stall_verdict::kind::none);
  std::vector<sample> at_threshold(10, with_vless_phase(30.0));
  CHECK(judge_stall(at_threshold).verdict == stall_verdict::kind::stall);
}

TEST_CASE("CSV quoting round-trips", "[runner]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  const auto cells = parse_csv_line("1,\"a,b\",\"say \"\"hi\"\"\",,x");
  CHECK(cells == std::vector<std::string>{"1", "a,b", "say \"hi\"", "", "x"});
}

TEST_CASE("samples.csv rows", "[runner]") {
  auto s = make_sample("vl", sample_mode::new_connection, 3, 17, 1.5);
  s.route.kind = route_kind::vless;
  s.route.session = 9;
  s.route.user = "default";
  s.timing.tls = 1.234;
  s.timing.vless = 0.05;
  s.timing.upstream = 0.08;
  auto f = make_sample("vl", sample_mode::reuse, 0, 18, 0, false);
  f.error = "response head: timeout after 5000 ms, then \"reset\"";
  auto h = make_sample("tls", sample_mode::new_connection, 3, 19, 4.0);  // https://: the inner handshake
  h.inner_tls_ns = 2'500'000;
  auto b = make_sample("vl/down", sample_mode::reuse, 1, 20, 2.0);  // bulk: 8 MB in 2 ms
  b.bytes = 8'000'000;
  auto w = make_sample("ws", sample_mode::new_connection, 2, 21, 1.2);  // WebSocket: the upgrade phase
  w.status = 204;
  w.route.kind = route_kind::vless;
  w.route.session = 10;
  w.route.user = "default";
  w.route.transport = "ws";
  w.timing.tls = 0.9;
  w.timing.upgrade = 0.03;
  w.timing.vless = 0.04;
  w.timing.upstream = 0.07;
  w.shared_h2 = true;                                                    // not what a ws sample does: the column only
  auto x = make_sample("xh", sample_mode::new_connection, 2, 22, 41.0);  // packet-up: its POST spacing
  x.timing.xpost = 0.02;
  x.timing.xgap = 40.1;
  x.timing.xgapmax = 40.5;
  const auto csv = samples_csv({s, f, h, b, w, x});
  CHECK(csv ==
        "round,path,mode,seq,ns,ok,error,status,route,session,user,tls_ms,vless_ms,resolve_ms,"
        "upstream_ms,route_mismatch,inner_tls_ms,bytes,mbps,transport,upgrade_ms,flow,shared_h2,xpost_ms,post_gap_ms,"
        "post_gap_max_ms\n"
        "3,vl,new,17,1500000,1,,200,vless,9,default,1.234,0.050,,0.080,0,,,,tls,,,0,,,\n"
        "0,vl,reuse,18,0,0,\"response head: timeout after 5000 ms, then \"\"reset\"\"\",,unknown,,,,,,,0,,,,,,,0,,,\n"
        "3,tls,new,19,4000000,1,,200,unknown,,,,,,,0,2.500,,,,,,0,,,\n"
        "1,vl/down,reuse,20,2000000,1,,200,unknown,,,,,,,0,,8000000,4000.000,,,,0,,,\n"
        "2,ws,new,21,1200000,1,,204,vless,10,default,0.900,0.040,,0.070,0,,,,ws,0.030,,1,,,\n"
        "2,xh,new,22,41000000,1,,200,unknown,,,,,,,0,,,,,,,0,0.020,40.100,40.500\n");
}

TEST_CASE("inner TLS phase and bulk throughput reach the table and summary.json", "[runner]") {
  std::vector<path_spec> paths(2);
  paths[0].name = "direct/down";
  paths[1].name = "p/down";
  paths[1].kind = path_kind::http_connect;
  std::vector<sample> samples;
  for (int i = 0; i < 3; ++i) {
    for (std::size_t p = 0; p < 2; ++p) {
      auto s = make_sample(paths[p].name, sample_mode::new_connection, i, static_cast<std::uint64_t>(10 * i + p),
                           p == 0 ? 1.0 + i : 2.0 + i);
      s.bytes = 1'000'000;                 // 1 MB in 1, 2, 3 ms (direct) or 2, 3, 4 ms
      s.inner_tls_ns = 500'000 * (i + 1);  // 0.5, 1.0, 1.5 ms
      samples.push_back(s);
    }
  }
  const auto res = analyze(paths, 0, samples, {}, 1);
  REQUIRE(res[0].fresh.mbps);
  CHECK(res[0].fresh.mbps->n == 3);
  CHECK(res[0].fresh.mbps->median == Approx(500.0));  // 1 MB / 2 ms
  // Type-7 quantile of {333.3, 500, 1000}: P5 = 333.3 + 0.1 * (500 - 333.3), P95 = 500 + 0.9 * 500.
  CHECK(res[0].fresh.mbps->p5 == Approx(1e6 / 3e3 + 0.1 * (500.0 - 1e6 / 3e3)));
  CHECK(res[0].fresh.mbps->p95 == Approx(950.0));
  CHECK(res[1].fresh.mbps->median == Approx(1e6 / 3e3));
  REQUIRE(res[0].fresh.inner_tls_median);
  CHECK(*res[0].fresh.inner_tls_median == Approx(1.0));
  const auto table = format_table(res);
  CHECK_THAT(table, Catch::Contains("inner TLS handshake with the target"));
  CHECK_THAT(table, Catch::Contains("median 500.0"));
  run_metadata meta;
  meta.run_id = "r2";
  meta.bulk_bytes = 1'000'000;
  const auto j = nlohmann::json::parse(summary_json(meta, res));
  CHECK(j["run"]["bulk_bytes"] == 1'000'000);
  CHECK(j["paths"]["direct/down"]["new"]["throughput_mbps"]["median"].get<double>() == Approx(500.0));
  CHECK(j["paths"]["p/down"]["new"]["inner_tls_median_ms"].get<double>() == Approx(1.0));
  CHECK_FALSE(j["paths"]["p/down"]["reuse"].contains("throughput_mbps"));
}

TEST_CASE("summary.json carries the statistics and run metadata", "[runner]") {
  fixture f;
  const auto res = analyze(f.paths, 0, f.samples, {}, 1);
  run_metadata meta;
  meta.run_id = "r1";
  meta.seed = 77;
  meta.command_line = "vlessbench run --path 'a=direct'";
  meta.new_count = 3;
  const auto j = nlohmann::json::parse(summary_json(meta, res));
  CHECK(j["run"]["id"] == "r1");
  CHECK(j["run"]["seed"] == 77);
  CHECK(j["run"]["command_line"] == "vlessbench run --path 'a=direct'");
  CHECK(j["run"]["counts"]["new"] == 3);
  CHECK(j["route_mismatches"] == 1);
  const auto& p = j["paths"]["proxy"];
  CHECK(p["kind"] == "http-connect");
  CHECK(p["new"]["n"] == 2);
  CHECK(p["new"]["failed"] == 1);
  CHECK(p["new"]["median_ms"].get<double>() == Approx(12.5));
  CHECK(p["new"]["p95_ms"].get<double>() == Approx(13.85));  // 11 + 0.95 * 3
  CHECK(p["new"]["paired_delta_median_ms"].get<double>() == Approx(10.5));
  CHECK(p["new"]["paired_delta_ci_low_ms"].get<double>() >= 10.0);
  CHECK(p["new"]["paired_delta_ci_high_ms"].get<double>() <= 11.0);
  CHECK(p["route_mismatches"] == 1);
  CHECK(p["stall"]["verdict"] == "no-data");
  CHECK(j["paths"]["direct"]["baseline"] == true);
  CHECK(j["paths"]["direct"]["new"]["paired_delta_median_ms"] == 0.0);
}

TEST_CASE("table shows every path and mode, the baseline, failures and mismatches", "[runner]") {
  fixture f;
  const auto t = format_table(analyze(f.paths, 0, f.samples, {}, 1));
  CHECK_THAT(t, Catch::Contains("baseline"));
  CHECK_THAT(t, Catch::Contains("12.500"));   // proxy new median
  CHECK_THAT(t, Catch::Contains("+10.500"));  // paired delta
  CHECK_THAT(t, Catch::Contains("ROUTE MISMATCH x1"));
  CHECK_THAT(t, Catch::Contains("1 x connect: Connection refused"));
}

TEST_CASE("report.svg is self-describing", "[runner]") {
  fixture f;
  run_metadata meta;
  meta.run_id = "r<1>";
  const auto svg = render_svg(meta, analyze(f.paths, 0, f.samples, {}, 1));
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK_THAT(svg, Catch::Contains("New connection") && Catch::Contains("Reused connection"));
  CHECK_THAT(svg, Catch::Contains("latency, ms (log scale)"));
  CHECK_THAT(svg, Catch::Contains("run r&lt;1&gt;"));
  CHECK_THAT(svg, Catch::Contains("<polyline"));
  CHECK_THAT(svg, Catch::Contains("proxy (http-connect)"));
  CHECK(svg.find("r<1>") == std::string::npos);
  CHECK(log_ticks(0.1, 10) == std::vector<double>{0.1, 0.2, 0.5, 1, 2, 5, 10});
  CHECK(log_ticks(1, 1).empty());
}

TEST_CASE("verify matches samples to the access log by run id and seq", "[runner]") {
  fixture f;
  auto res = analyze(f.paths, 0, f.samples, {}, 1);
  run_metadata meta;
  meta.run_id = "run9";
  const auto summary = summary_json(meta, res);
  // Two samples only: seq 1 direct ok, seq 2 proxy ok, seq 3 proxy failed.
  std::vector<sample> s{f.samples[0], f.samples[1], f.samples[2]};
  const auto csv = samples_csv(s);
  std::istringstream log(
      "{\"event\":\"http.request\",\"run\":\"run9\",\"seq\":\"1\",\"path_label\":\"direct\",\"route\":\"direct\","
      "\"status\":200}\n"
      "not json\n"
      "{\"event\":\"http.request\",\"run\":\"other\",\"seq\":\"2\",\"path_label\":\"proxy\",\"route\":\"vless\","
      "\"status\":200}\n"
      "{\"event\":\"vless.session\",\"id\":3}\n");
  auto r = verify_run(summary, csv, log);
  CHECK(r.samples == 3);
  CHECK(r.matched == 1);
  CHECK(r.unseen_ok == 1);      // seq 2 was logged for another run only
  CHECK(r.unseen_failed == 1);  // seq 3 never reached the server
  CHECK(r.log_unparsed == 1);
  CHECK_FALSE(r.ok());
  CHECK_THAT(format_verify_report(r), !Catch::Contains("wrong file"));  // one sample was found
  std::istringstream other_log(
      "{\"event\":\"http.request\",\"run\":\"other\",\"seq\":\"1\",\"path_label\":\"direct\",\"route\":\"direct\"}\n");
  CHECK_THAT(format_verify_report(verify_run(summary, csv, other_log)),
             Catch::Contains("not one sample of run run9 is in this log: it may be the wrong file"));

  std::istringstream log2(
      "{\"event\":\"http.request\",\"run\":\"run9\",\"seq\":\"1\",\"path_label\":\"direct\",\"route\":\"vless\","
      "\"vless_session\":4,\"status\":200}\n"
      "{\"event\":\"http.request\",\"run\":\"run9\",\"seq\":\"2\",\"path_label\":\"proxy\",\"route\":\"vless\","
      "\"status\":200}\n");
  r = verify_run(summary, csv, log2);
  CHECK(r.matched == 2);
  CHECK(r.route_mismatches == 1);  // the direct baseline went through VLESS
  CHECK(r.unseen_ok == 0);

  std::istringstream log3(
      "{\"event\":\"http.request\",\"run\":\"run9\",\"seq\":\"1\",\"path_label\":\"direct\",\"route\":\"direct\","
      "\"status\":200}\n"
      "{\"event\":\"http.request\",\"run\":\"run9\",\"seq\":\"2\",\"path_label\":\"proxy\",\"route\":\"vless\","
      "\"status\":200}\n");
  r = verify_run(summary, csv, log3);
  CHECK(r.ok());
  CHECK_THAT(format_verify_report(r), Catch::Contains("verify: OK"));
}

TEST_CASE("verify: banner samples by the session their banner named, bulk adds the server's MB/s", "[runner]") {
  const std::string summary =
      R"({"run":{"id":"b1","target":"banner://127.0.0.1:8082"},"paths":{"direct":{"kind":"direct"},)"
      R"("vl":{"kind":"vless"}}})";
  std::vector<sample> samples;
  auto d = make_sample("direct", sample_mode::new_connection, 0, 1, 0.1);
  d.route.kind = route_kind::direct;
  auto v = make_sample("vl", sample_mode::new_connection, 0, 2, 0.8);
  v.route.kind = route_kind::vless;
  v.route.session = 5;
  samples = {d, v};
  const std::string csv = samples_csv(samples);
  std::istringstream none("");
  auto r = verify_run(summary, csv, none);
  CHECK(r.unseen_ok == 2);
  CHECK_FALSE(r.ok());
  std::istringstream log(R"({"event":"banner.connection","listener":"banner","route":"direct","bytes_in":0})"
                         "\n"
                         R"({"event":"banner.connection","listener":"banner","route":"vless","vless_session":5})"
                         "\n");
  r = verify_run(summary, csv, log);
  CHECK(r.log_banners == 2);
  CHECK(r.matched == 2);
  CHECK(r.ok());
  // A banner connection logs no http.request: the report does not count requests it never has.
  CHECK_THAT(format_verify_report(r), Catch::Contains("2 found in the access log (by their banner.connection lines") &&
                                          !Catch::Contains("logged requests"));
  std::istringstream other(R"({"event":"banner.connection","route":"vless","vless_session":6})"
                           "\n");
  r = verify_run(summary, csv, other);
  CHECK(r.unseen_ok == 2);  // session 5 never logged, and no direct connection at all

  const std::string bulk_summary =
      R"({"run":{"id":"k1","target":"http://127.0.0.1:8080/","bulk_bytes":1000000},"paths":{"direct/down":{"kind":"direct"}}})";
  auto k = make_sample("direct/down", sample_mode::reuse, 0, 3, 2.0);  // 1 MB in 2 ms: 500 MB/s
  k.bytes = 1'000'000;
  k.route.kind = route_kind::direct;
  std::istringstream klog(
      R"({"event":"http.request","run":"k1","seq":"3","path_label":"direct/down","route":"direct","status":200,)"
      R"("bytes":1000000,"duration_us":1000})"
      "\n");
  r = verify_run(bulk_summary, samples_csv({k}), klog);
  CHECK(r.ok());
  REQUIRE(r.bulk.size() == 1);
  CHECK(r.bulk[0].client_mbps == Approx(500.0));
  CHECK(r.bulk[0].server_mbps == Approx(1000.0));
  CHECK_THAT(format_verify_report(r), Catch::Contains("server    1000.0"));
}

TEST_CASE("compare lays runs side by side", "[runner]") {
  fixture f;
  const auto res = analyze(f.paths, 0, f.samples, {}, 1);
  run_metadata a, b;
  a.run_id = "A";
  b.run_id = "B";
  const auto out = format_comparison({{"dirA", summary_json(a, res)}, {"dirB", summary_json(b, res)}});
  CHECK_THAT(out, Catch::Contains("[1] dirA: run A") && Catch::Contains("[2] dirB: run B"));
  CHECK_THAT(out, Catch::Contains("new median"));
  CHECK_THAT(out, Catch::Contains("+10.500"));
  CHECK_THAT(out, Catch::Contains("[2]-[1]"));
  // The difference column: the second run's proxy new median 2 ms slower than the first's.
  auto slower = f.samples;
  for (auto& s : slower)
    if (s.path == "proxy" && s.mode == sample_mode::new_connection) s.ns += 2'000'000;
  const auto diff = format_comparison(
      {{"dirA", summary_json(a, res)}, {"dirB", summary_json(b, analyze(f.paths, 0, slower, {}, 1))}});
  std::istringstream lines(diff);
  std::string line, proxy_new;
  while (std::getline(lines, line))
    if (line.starts_with("proxy") && line.find("new median") != std::string::npos) proxy_new = line;
  CHECK_THAT(proxy_new, Catch::Contains("12.500") && Catch::Contains("14.500") && Catch::EndsWith("+2.000"));
  CHECK_THROWS(format_comparison({{"bad", "{}"}}));
  CHECK_THAT(out, !Catch::Contains("server ack, gen"));  // the daemon said nothing: no row

  // A reload to QUICKACK between two runs: each run's row says what the daemon ran.
  auto before = f.samples, after = f.samples;
  for (auto& s : before)
    if (s.path == "proxy") s.timing.ack = "kernel", s.timing.generation = 1;
  for (auto& s : after)
    if (s.path == "proxy") s.timing.ack = "on", s.timing.generation = 2;
  const auto reload = format_comparison({{"dirA", summary_json(a, analyze(f.paths, 0, before, {}, 1))},
                                         {"dirB", summary_json(b, analyze(f.paths, 0, after, {}, 1))}});
  std::istringstream rl(reload);
  std::string server_row;
  while (std::getline(rl, line))
    if (line.find("server ack, gen") != std::string::npos) server_row = line;
  CHECK_THAT(server_row, Catch::Contains("kernel g1") && Catch::Contains("on g2"));
  CHECK_THAT(format_table(analyze(f.paths, 0, after, {}, 1)), Catch::Contains("(server: ack on, generation 2)"));
}

TEST_CASE("verify: udp and dns samples by the session their reply named and its datagram count", "[runner]") {
  const std::string summary =
      R"({"run":{"id":"u1","target":"udp://127.0.0.1:8054"},"paths":{"direct":{"kind":"direct"},)"
      R"("vl":{"kind":"vless"},"leaky":{"kind":"socks5"}}})";
  auto d = make_sample("direct", sample_mode::new_connection, 0, 1, 0.1);
  d.route.kind = route_kind::direct;
  auto v1 = make_sample("vl", sample_mode::reuse, 0, 2, 0.2);
  v1.route.kind = route_kind::vless;
  v1.route.session = 9;
  auto v2 = v1;
  v2.seq = 3;
  const std::string csv = samples_csv({d, v1, v2});
  std::istringstream none("");
  auto r = verify_run(summary, csv, none);
  CHECK(r.unseen_ok == 3);
  CHECK(r.datagram_event == "udp.packet");
  std::istringstream log(R"({"event":"udp.packet","listener":"udp","route":"direct","packets_in":1})"
                         "\n"
                         R"({"event":"udp.packet","listener":"udp","route":"vless","vless_session":9,"packets_in":3})"
                         "\n"
                         R"({"event":"dns.query","listener":"dns","route":"vless","vless_session":4,"name":"x"})"
                         "\n");
  r = verify_run(summary, csv, log);
  CHECK(r.log_datagram_lines == 2);
  CHECK(r.matched == 3);
  CHECK(r.ok());
  CHECK_THAT(format_verify_report(r), Catch::Contains("udp.packet lines in the log: 2"));
  // The server counted fewer datagrams on session 9 than samples named it.
  std::istringstream short_log(R"({"event":"udp.packet","route":"direct","packets_in":1})"
                               "\n"
                               R"({"event":"udp.packet","route":"vless","vless_session":9,"packets_in":1})"
                               "\n");
  r = verify_run(summary, csv, short_log);
  CHECK(r.disagreements == 1);
  CHECK_FALSE(r.ok());
  // A proxy path whose replies came back direct: a route mismatch.
  auto leak = make_sample("leaky", sample_mode::new_connection, 0, 4, 0.3);
  leak.route.kind = route_kind::direct;
  std::istringstream direct_log(R"({"event":"udp.packet","route":"direct","packets_in":5})"
                                "\n");
  r = verify_run(summary, samples_csv({d, leak}), direct_log);
  CHECK(r.route_mismatches == 1);
  CHECK_FALSE(r.ok());

  // A direct path's sample names its own UDP address: matched to that flow's lines only.
  auto df = d;
  df.flow = "127.0.0.1:40000";
  auto df2 = df;
  df2.seq = 5;
  std::istringstream peer_log(R"({"event":"udp.packet","route":"direct","peer":"127.0.0.1:40001","packets_in":9})"
                              "\n"
                              R"({"event":"udp.packet","route":"direct","peer":"127.0.0.1:40000","packets_in":1})"
                              "\n");
  r = verify_run(summary, samples_csv({df}), peer_log);
  CHECK(r.ok());
  peer_log.clear();
  peer_log.seekg(0);
  r = verify_run(summary, samples_csv({df, df2}), peer_log);
  CHECK(r.disagreements == 1);  // two samples from the flow, one datagram logged on it
  CHECK_THAT(format_verify_report(r), Catch::Contains("flow 127.0.0.1:40000: 2 ok samples"));
  std::istringstream elsewhere(R"({"event":"udp.packet","route":"direct","peer":"127.0.0.1:40001","packets_in":9})"
                               "\n");
  r = verify_run(summary, samples_csv({df}), elsewhere);
  CHECK(r.unseen_ok == 1);

  // dns://: dns.query lines over UDP for the run's name, one query each.
  const std::string dns_summary =
      R"({"run":{"id":"d1","target":"dns://127.0.0.1:8053/Host.vlessbench.test"},"paths":{"vl":{"kind":"vless"}}})";
  std::istringstream dns_log(
      R"({"event":"dns.query","transport":"udp","route":"vless","vless_session":9,"name":"host.vlessbench.test"})"
      "\n"
      R"({"event":"dns.query","transport":"tcp","route":"vless","vless_session":9,"name":"host.vlessbench.test"})"
      "\n"
      R"({"event":"dns.query","transport":"udp","route":"vless","vless_session":9,"name":"other.vlessbench.test"})"
      "\n");
  r = verify_run(dns_summary, samples_csv({v1, v2}), dns_log);
  CHECK(r.log_datagram_lines == 1);
  CHECK(r.matched == 2);
  CHECK(r.disagreements == 1);  // two samples named session 9, one query of the name over UDP on it
}

TEST_CASE("udp:// and dns:// runs say the stall verdict does not apply", "[runner]") {
  fixture f;
  auto results = analyze(f.paths, 0, f.samples, {}, 1);
  for (auto& r : results) r.stall = stall_not_applicable();
  const auto table = format_table(results);
  CHECK_THAT(table, Catch::Contains("stall verdict: not applicable"));
  CHECK_THAT(table, !Catch::Contains("TLS done -> VLESS header >= 30 ms):"));
  run_metadata meta;
  meta.run_id = "x";
  const auto j = nlohmann::json::parse(summary_json(meta, results));
  CHECK(j["paths"]["proxy"]["stall"]["verdict"] == "n/a");
}

namespace {

// The median of one samples.csv column over the rows of one path and mode, as a reader of the file
// would compute it: the verdict's quoted numbers must be these.
double csv_median(const std::string& csv, const std::string& column) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  const auto head = parse_csv_line(line);
  const auto col = static_cast<std::size_t>(std::find(head.begin(), head.end(), column) - head.begin());
  std::vector<double> v;
  while (std::getline(in, line)) {
    const auto cells = parse_csv_line(line);
    if (cells.at(2) == "new" && cells.at(5) == "1" && !cells.at(col).empty()) v.push_back(std::stod(cells.at(col)));
  }
  std::sort(v.begin(), v.end());
  return *vlessbench::stats::median(v);
}

std::string fmt3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

TEST_CASE("a verdict's medians are the ones samples.csv gives", "[runner][stats]") {
  // 99 quick headers and one that waited 30.02 ms: "no stall", and its median phases are those of
  // all 100 samples, not of the one stalled sample.
  std::vector<sample> samples;
  for (int i = 0; i < 100; ++i) {
    auto s = with_vless_phase(i == 42 ? 30.02 : 0.010 + 0.0001 * i);
    s.timing.tls = i == 42 ? 9.5 : 0.8 + 0.001 * i;
    s.timing.upstream = i == 42 ? 7.0 : 0.05 + 0.001 * i;
    s.seq = static_cast<std::uint64_t>(i + 1);
    samples.push_back(s);
  }
  const auto v = judge_stall(samples);
  REQUIRE(v.verdict == stall_verdict::kind::none);
  CHECK_FALSE(v.phases_of_stalled);
  const auto csv = samples_csv(samples);
  for (const auto& [column, value] :
       {std::pair{"vless_ms", v.vless_ms}, std::pair{"tls_ms", v.tls_ms}, std::pair{"upstream_ms", v.upstream_ms}}) {
    REQUIRE(value);
    CHECK(*value == Approx(csv_median(csv, column)).margin(0.0005));
  }
  CHECK_THAT(v.text, Catch::Contains("1/100") && Catch::Contains("max 30.020 ms") &&
                         Catch::Contains("median phases of all 100: tls " + fmt3(csv_median(csv, "tls_ms")) +
                                         " ms, vless " + fmt3(csv_median(csv, "vless_ms")) + " ms"));
  CHECK_THAT(v.text, !Catch::Contains("vless 30.020 ms"));

  // 60 of 100 stalled: the medians quoted are of those 60, and say so.
  for (int i = 0; i < 60; ++i) samples[static_cast<std::size_t>(i)].timing.vless = 40.0 + i * 0.01;
  const auto st = judge_stall(samples);
  CHECK(st.verdict == stall_verdict::kind::stall);
  CHECK(st.phases_of_stalled);
  CHECK_THAT(st.text, Catch::Contains("median phases of those 60: tls "));
  CHECK(*st.vless_ms == Approx(40.295));
}

TEST_CASE("no impossible phase is quoted", "[runner][stats]") {
  // gRPC: the session times no tls phase of its own: the line names none, not "tls - ms".
  std::vector<sample> grpc(10, with_vless_phase(0.05));
  for (auto& s : grpc) s.timing.tls.reset();
  const auto g = judge_stall(grpc);
  CHECK_THAT(g.text, !Catch::Contains("tls") && Catch::Contains("vless 0.050 ms, upstream 0.100 ms"));

  // A mux sub of 2 ms whose upstream phase says 900 ms (its shared session's): left out, counted.
  std::vector<sample> mux(10, with_vless_phase(0.05));
  for (auto& s : mux) {
    s.ns = 2'000'000;
    s.timing.upstream = 900.0;
  }
  const auto m = judge_stall(mux);
  CHECK_FALSE(m.upstream_ms);
  CHECK(m.foreign_phases == 10);
  CHECK_THAT(m.text, !Catch::Contains("900") && Catch::Contains("10 server phases longer than their whole sample"));

  // Mux subs of one session: each answer carries the session's phases (a 9 ms TLS handshake timed
  // once, before these samples), whatever each sample's own length: none is quoted.
  std::vector<sample> subs(6, with_vless_phase(0.04));
  for (std::size_t i = 0; i < subs.size(); ++i) {
    subs[i].route.kind = route_kind::vless;
    subs[i].route.session = 7;
    subs[i].timing.tls = 8.969;
    subs[i].ns = i == 0 ? 12'000'000 : 400'000;  // one slow sample would let a 9 ms phase through
  }
  const auto ms = judge_stall(subs);
  CHECK(ms.with_timing == 0);
  CHECK(ms.shared_session_samples == 6);
  CHECK_THAT(ms.text, Catch::Contains("subs of shared mux sessions") && !Catch::Contains("8.969"));

  // A banner target: the answers went through VLESS, they just carry no phases.
  std::vector<sample> banner(3, make_sample("p", sample_mode::new_connection, 0, 1, 2));
  for (auto& s : banner) s.route.kind = route_kind::vless;
  const auto b = judge_stall(banner);
  CHECK(b.verdict == stall_verdict::kind::no_data);
  CHECK_THAT(b.text, Catch::Contains("3 new connections went through the daemon's VLESS listener") &&
                         !Catch::Contains("did not pass"));
}

TEST_CASE("no nan, inf or negative phase reaches the verdict or samples.csv", "[runner][stats]") {
  // Samples read back from a samples.csv someone else wrote: the runner's own refuse such phases.
  std::vector<sample> bad(10, with_vless_phase(0.05));
  for (std::size_t i = 0; i < bad.size(); ++i) {
    bad[i].timing.vless = i % 2 == 0 ? std::numeric_limits<double>::quiet_NaN() : -1e29;
    bad[i].timing.tls = std::numeric_limits<double>::infinity();
  }
  const auto v = judge_stall(bad);
  CHECK_FALSE(v.vless_ms);
  CHECK_FALSE(v.tls_ms);
  CHECK_THAT(v.text, !Catch::Contains("nan") && !Catch::Contains("inf") && !Catch::Contains("-1"));
  const auto csv = samples_csv(bad);
  CHECK_THAT(csv, !Catch::Contains("nan") && !Catch::Contains("inf") && !Catch::Contains("e+29"));
}

TEST_CASE("failing paths: none ok, or over the stated share", "[runner]") {
  std::vector<path_spec> paths{make_path("direct", path_kind::direct), make_path("proxy", path_kind::http_connect)};
  std::vector<sample> s;
  for (int i = 0; i < 10; ++i) {
    s.push_back(make_sample("direct", sample_mode::new_connection, i, 2 * i + 1, 1.0));
    s.push_back(make_sample("proxy", sample_mode::new_connection, i, 2 * i + 2, 2.0, i >= 8));  // 8 of 10 fail
  }
  s[3].error = "status 502";  // an earlier failure: the last one is what is named
  const auto res = analyze(paths, 0, s, {}, 1);
  const auto f = failing_paths(res, 0.5);
  REQUIRE(f.size() == 1);
  CHECK(f[0].name == "proxy");
  CHECK(f[0].failed == 8);
  CHECK(f[0].last_error == "connect: Connection refused");
  CHECK_THAT(f[0].hint, Catch::Contains("proxy entry"));
  CHECK(failing_paths(res, 0.8).empty());  // 80% is not more than 80%
  CHECK_THAT(format_failing_paths(f, 0.5), Catch::Contains("path proxy: 8/10 samples failed (more than 50%"));

  CHECK_THAT(failure_hint(path_kind::vless, "response head: connection closed by peer"),
             Catch::Contains("unknown_user"));
  CHECK_THAT(failure_hint(path_kind::vless, "tls handshake: certificate verify failed"),
             Catch::Contains("allowInsecure=1"));
  CHECK_THAT(failure_hint(path_kind::vless, "connect: Connection refused"), Catch::Contains("daemon's listener"));
  CHECK(failure_hint(path_kind::direct, "something new").empty());
}

TEST_CASE("failing paths: a vless path closed after its header names what the daemon may have said", "[runner]") {
  // The daemon closes a session right after its header for a wrong UUID (unknown_user) and when it
  // cannot reach the target (connect_failed): the direct path tells the second apart.
  std::vector<path_spec> paths{make_path("direct", path_kind::direct), make_path("v", path_kind::vless)};
  std::vector<sample> s;
  for (int i = 0; i < 4; ++i) {
    s.push_back(make_sample("direct", sample_mode::new_connection, i, 2 * i + 1, 1.0, false));
    s.push_back(make_sample("v", sample_mode::new_connection, i, 2 * i + 2, 2.0, false));
    s.back().error = "response head: connection closed by peer";
  }
  const auto down = failing_paths(analyze(paths, 0, s, {}, 1), 0.1);
  REQUIRE(down.size() == 2);
  CHECK(down[1].name == "v");
  CHECK_THAT(down[1].hint, Catch::Contains("the direct path failed too (connect: Connection refused)") &&
                               Catch::Contains("connect_failed") && !Catch::Contains("UUID"));
  for (auto& x : s)
    if (x.path == "direct") x.ok = true, x.error.clear(), x.status = 200;
  const auto refused = failing_paths(analyze(paths, 0, s, {}, 1), 0.1);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0].hint,
             Catch::Contains("unknown_user") && Catch::Contains("connect_failed") && !Catch::Contains("usually"));
}

TEST_CASE("summary.json keeps no UUID", "[runner]") {
  CHECK(redact_links("vless://1b0e-uuid@127.0.0.1:8443?security=tls#a") ==
        "vless://REDACTED@127.0.0.1:8443?security=tls#a");
  CHECK(redact_links("run --path 'vl=vless://u@h:1?x=1#n' --path p=vless://v@h:2") ==
        "run --path 'vl=vless://REDACTED@h:1?x=1#n' --path p=vless://REDACTED@h:2");
  CHECK(redact_links("socks5://user@h:1 vless://") == "socks5://user@h:1 vless://");
  fixture f;
  f.paths[1].kind = path_kind::vless;
  f.paths[1].spec = "vless://0f0f0f0f-aaaa-4bbb-8ccc-123456789abc@127.0.0.1:8443?security=tls#k";
  run_metadata meta;
  meta.command_line = "vlessbench run --path 'proxy=" + f.paths[1].spec + "'";
  const auto j = summary_json(meta, analyze(f.paths, 0, f.samples, {}, 1));
  CHECK(j.find("0f0f0f0f") == std::string::npos);
  CHECK_THAT(j, Catch::Contains("vless://REDACTED@127.0.0.1:8443?security=tls#k"));
}

TEST_CASE("export-markdown: the table as Markdown", "[runner]") {
  fixture f;
  run_metadata meta;
  meta.run_id = "r1";
  meta.target = "http://127.0.0.1:8080/";
  meta.new_count = 3;
  meta.reuse_count = 1;
  meta.warmup = 1;
  const auto md = format_markdown(meta, analyze(f.paths, 0, f.samples, {}, 1));
  CHECK_THAT(md, Catch::Contains("after 1 warm-up,") || Catch::Contains("after 1 warm-up\n"));
  CHECK_THAT(md, Catch::Contains("| path | mode | n | fail | median ms |"));
  CHECK_THAT(md, Catch::Contains("| proxy | new | 2 | 1 | 12.500 |"));
  CHECK_THAT(md, Catch::Contains("| +10.500 |"));
  CHECK(plural(1, "path", "paths") == "1 path");
  CHECK(plural(2, "path", "paths") == "2 paths");
}

TEST_CASE("each target kind's picture says what it timed", "[runner]") {
  fixture f;
  const auto res = analyze(f.paths, 0, f.samples, {}, 1);
  const std::pair<const char*, const char*> kinds[] = {
      {"http://127.0.0.1:8080/", "one GET, until the body is read"},
      {"https://127.0.0.1:8081/", "TLS handshake with the target + one GET"},
      {"banner://127.0.0.1:8082", "until the first byte of the server's banner"},
      {"udp://127.0.0.1:8083", "one datagram and its echo"},
      {"dns://127.0.0.1:8053/a.test", "one A query and its answer"}};
  for (const auto& [target, caption] : kinds) {
    run_metadata meta;
    meta.target = target;
    const auto svg = render_svg(meta, res);
    CHECK_THAT(svg, Catch::Contains(vlessbench::html_escape(caption)));  // as the SVG text holds it ("server&#39;s")
    if (std::string_view(target) != "http://127.0.0.1:8080/")
      CHECK_THAT(svg, !Catch::Contains("connect + proxy/TLS/VLESS setup + one GET"));
  }
  // Datagram legends carry no TCP client options.
  auto vl = res;
  vl[1].kind = path_kind::vless;
  run_metadata udp;
  udp.target = "udp://127.0.0.1:8083";
  CHECK_THAT(render_svg(udp, vl), !Catch::Contains("nodelay"));
  run_metadata http;
  http.target = "http://127.0.0.1:8080/";
  CHECK_THAT(render_svg(http, vl), Catch::Contains("nodelay on, writes one"));

  // Bulk: a throughput picture with the size, no latency axis.
  auto bulk = res;
  bulk[1].fresh.sorted_mbps = {120.5, 130.25};
  bulk[1].fresh.mbps = mode_result::throughput{2, 125.375, 121, 130};
  run_metadata b;
  b.target = "http://127.0.0.1:8080/";
  b.bulk_bytes = 16u << 20;
  const auto bsvg = render_svg(b, bulk);
  CHECK_THAT(bsvg, Catch::Contains("throughput, MB/s") && Catch::Contains("16777216 bytes") &&
                       Catch::Contains("<circle") && !Catch::Contains("latency, ms"));

  // A run with server timing gets the stall plot and its 30 ms threshold line.
  auto stalled = res;
  stalled[1].stall = judge_stall(std::vector<sample>{with_vless_phase(40), with_vless_phase(0.05)});
  const auto ssvg = render_svg(http, stalled);
  CHECK_THAT(ssvg, Catch::Contains("class=\"threshold\"") && Catch::Contains("stall threshold 30 ms"));
  CHECK_THAT(render_svg(http, res), !Catch::Contains("stall threshold"));

  run_metadata stopped = http;
  stopped.interrupted = "SIGINT";
  CHECK_THAT(render_svg(stopped, res), Catch::Contains("interrupted by SIGINT"));
  auto no_reuse = res;
  for (auto& r : no_reuse) r.reuse = {};
  CHECK_THAT(render_svg(stopped, no_reuse), Catch::Contains("no samples taken") && !Catch::Contains("no successful"));
}

TEST_CASE("analyze: gRPC through a client's entry says its new connections shared one connection", "[runner]") {
  // Real cores keep one HTTP/2 connection for gRPC; the built-in client opens one per sample.
  std::vector<path_spec> paths{make_path("direct", path_kind::direct), make_path("core", path_kind::http_connect),
                               make_path("builtin", path_kind::vless)};
  std::vector<sample> s;
  for (int i = 0; i < 3; ++i) {
    s.push_back(make_sample("direct", sample_mode::new_connection, i, 3 * i + 1, 1.0));
    for (const char* p : {"core", "builtin"}) {
      s.push_back(make_sample(p, sample_mode::new_connection, i, 3 * i + 2, 2.0));
      s.back().route.kind = route_kind::vless;
      s.back().route.session = 10 * i + (p[0] == 'c' ? 1 : 2);
      s.back().route.transport = "grpc";
    }
  }
  const auto res = analyze(paths, 0, s, {}, 1);
  CHECK_THAT(res[1].stall.text, Catch::Contains("3 new-connection samples were new streams of the client's shared "
                                                "HTTP/2 connection"));
  CHECK_THAT(res[2].stall.text, !Catch::Contains("HTTP/2"));
  CHECK_THAT(res[0].stall.text, !Catch::Contains("HTTP/2"));
}

TEST_CASE("report.svg: more paths than colours get a row each, not repeating curves", "[runner]") {
  // `clients --links` with seven nodes: 32 paths. Eight colours repeated four times told no
  // curve from another; a row per path, named beside it, does.
  auto svg_for = [](int n) {
    std::vector<path_spec> paths{make_path("direct", path_kind::direct)};
    for (int i = 1; i < n; ++i) paths.push_back(make_path("core-" + std::to_string(i), path_kind::http_connect));
    std::vector<sample> s;
    for (int round = 0; round < 5; ++round)
      for (int i = 0; i < n; ++i) {
        s.push_back(make_sample(paths[static_cast<std::size_t>(i)].name, sample_mode::new_connection, round,
                                static_cast<std::uint64_t>(round * n + i + 1), 1.0 + i + 0.1 * round));
        s.push_back(make_sample(paths[static_cast<std::size_t>(i)].name, sample_mode::reuse, round,
                                static_cast<std::uint64_t>(1000 + round * n + i), 0.5 + 0.1 * i));
      }
    run_metadata meta;
    return render_svg(meta, analyze(paths, 0, s, {}, 1));
  };
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const auto many = svg_for(32);
  CHECK(count(many, "<polyline") == 0);
  CHECK(count(many, "stroke-dasharray=\"6 3\"") == 0);  // no colour repeated with dashes
  CHECK(count(many, "class=\"row\"") == 64);            // 32 paths in both panels
  CHECK_THAT(many, Catch::Contains(">core-31</text>") && Catch::Contains("One row per path"));
  const auto few = svg_for(8);
  CHECK(count(few, "<polyline") == 16);
  CHECK(count(few, "class=\"row\"") == 0);
}

TEST_CASE("samples that rode a shared HTTP/2 connection are counted in the table and summary.json", "[runner]") {
  std::vector<path_spec> paths(2);
  paths[0].name = "direct";
  paths[1].name = "xh2";
  paths[1].kind = path_kind::vless;
  std::vector<sample> samples;
  for (int i = 0; i < 3; ++i)
    for (std::size_t p = 0; p < 2; ++p)
      for (const auto mode : {sample_mode::new_connection, sample_mode::reuse}) {
        auto s = make_sample(paths[p].name, mode, i, static_cast<std::uint64_t>(10 * i + p), 1.0 + i);
        s.shared_h2 = p == 1 && mode == sample_mode::reuse && i > 0;  // the first rode a fresh connection
        samples.push_back(s);
      }
  const auto res = analyze(paths, 0, samples, {}, 1);
  CHECK(res[0].shared_h2_reuse == 0);
  CHECK(res[1].shared_h2_fresh == 0);
  CHECK(res[1].shared_h2_reuse == 2);
  const auto table = format_table(res);
  CHECK_THAT(table, Catch::Contains("shared HTTP/2 connections (XMUX):\n  xh2"));
  CHECK_THAT(table, Catch::Contains("0 of 3 new, 2 of 3 reused samples rode"));
  run_metadata meta;
  meta.run_id = "x";
  const auto j = nlohmann::json::parse(summary_json(meta, res));
  CHECK(j["paths"]["xh2"]["shared_h2"]["reuse"] == 2);
  CHECK_FALSE(j["paths"]["direct"].contains("shared_h2"));
}
