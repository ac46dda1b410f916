// The browser probe's posted results: the strict, bounded reader (core/wire/probe_result), the daemon's
// summary of them, and the target's handling of /probe and POST /probe/result.
#include <catch2/catch.hpp>

#include <string>

#include "core/wire/probe_result.hpp"
#include "target/probe_page.hpp"
#include "target/probe_runs.hpp"
#include "core/wire/route_header.hpp"
#include "target/request_handler.hpp"

using namespace vlessbench;

namespace {

const std::string good_body =
    R"({"v":1,"run":"k3x9","new":2,"reuse":1,"verdict":"stall","samples":[)"
    R"({"seq":2,"path":"target","mode":"new","ok":true,"ms":40.5,"route":"vless","session":17,"tls":1.2,"vless":41,"upstream":0.1},)"
    R"({"seq":3,"path":"target","mode":"new","ok":true,"ms":2.5,"route":"vless","session":18,"tls":1.1,"vless":0.05,"upstream":0.1},)"
    R"({"seq":5,"path":"target","mode":"reuse","ok":true,"ms":0.5,"route":"vless","session":18},)"
    R"({"seq":6,"path":"control","mode":"reuse","ok":false,"ms":null,"route":"unknown","session":null,"tls":null,"vless":null,"upstream":null}]})";

std::string_view reason_of(std::string_view body) {
  const auto r = parse_probe_result(body);
  REQUIRE(r.invalid());
  return r.reason;
}

http::request get(std::string target, std::string method = "GET") {
  http::request r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

}  // namespace

TEST_CASE("probe result: a valid body is read field by field", "[probe]") {
  const auto r = parse_probe_result(good_body);
  REQUIRE(r.complete());
  CHECK(r.consumed == good_body.size());
  CHECK(r.value.run == "k3x9");
  CHECK(r.value.new_count == 2);
  CHECK(r.value.reuse_count == 1);
  CHECK(r.value.verdict == "stall");
  REQUIRE(r.value.samples.size() == 4);
  const auto& s = r.value.samples[0];
  CHECK(s.seq == 2);
  CHECK(s.path == "target");
  CHECK(s.mode == "new");
  CHECK(s.ok);
  CHECK(*s.ms == 40.5);
  CHECK(s.route == "vless");
  CHECK(*s.session == 17);
  CHECK(*s.tls == 1.2);
  CHECK(*s.vless == 41);
  CHECK(*s.upstream == 0.1);
  CHECK_FALSE(r.value.samples[2].tls);
  CHECK_FALSE(r.value.samples[3].ok);
  CHECK_FALSE(r.value.samples[3].session);
}

TEST_CASE("probe result: the daemon's own summary and stall verdict", "[probe]") {
  auto r = parse_probe_result(good_body);
  REQUIRE(r.complete());
  // Unverified (the daemon never saw these sessions): no proof, whatever the page claims.
  const auto unverified = summarize_probe(r.value);
  CHECK(unverified.verified == 0);
  CHECK(unverified.vless_samples == 0);
  CHECK(unverified.stall_samples == 0);
  CHECK(unverified.verdict == "no_vless");
  for (auto& s : r.value.samples) s.verified = true;
  const auto sum = summarize_probe(r.value);
  CHECK(sum.verified == 3);
  CHECK(sum.ok == 3);
  CHECK(sum.failed == 1);
  CHECK(sum.vless_samples == 3);
  CHECK(sum.stall_samples == 1);  // 41 ms >= the 30 ms threshold; 0.05 ms is not
  CHECK(sum.verdict == "stall");
  CHECK(*sum.new_median_ms == Approx(21.5));
  CHECK(*sum.reuse_median_ms == 0.5);

  probe_result direct;
  direct.samples.push_back(
      probe_sample{.seq = 1, .path = "target", .mode = "new", .ok = true, .ms = 1.0, .route = "direct"});
  const auto d = summarize_probe(direct);
  CHECK(d.verdict == "no_vless");
  CHECK(d.direct_samples == 1);
  CHECK_FALSE(d.reuse_median_ms);

  probe_sample at{.route = "vless", .vless = stall_threshold_ms};
  CHECK(probe_sample_stalled(at));
  at.vless = stall_threshold_ms - 0.001;
  CHECK_FALSE(probe_sample_stalled(at));
}

TEST_CASE(
    "probe result: malformed, oversized and hostile bodies are refused "
    "with a reason",
    "[probe]") {
  CHECK(reason_of("") == "unexpected end of body");
  CHECK(reason_of("[]") == "document is not an object");
  CHECK(reason_of(R"({"v":1,"run":"a")") == "unexpected end of body");
  CHECK(reason_of(R"({"v":2,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[]})") == "unknown version");
  CHECK(reason_of(R"({"v":1,"run":"a b","new":0,"reuse":0,"verdict":"stall","samples":[]})") == "bad run id");
  CHECK(reason_of(R"({"v":1,"run":"a","new":1.5,"reuse":0,"verdict":"stall","samples":[]})") == "bad new count");
  CHECK(reason_of(R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"maybe","samples":[]})") == "bad verdict");
  CHECK(reason_of(R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[],"x":1})") == "unknown member");
  CHECK(reason_of(R"({"v":1,"v":1})") == "duplicate member");
  CHECK(reason_of(R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[]} x)") ==
        "trailing bytes after the document");
  CHECK(reason_of(R"({"v":[[[[[1]]]]]})") == "nested too deep");
  CHECK(
      reason_of(
          R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[{"seq":1,"path":"target","mode":"new","ok":true,"route":"vless"}]})") ==
      "sample: ok without ms");
  CHECK(
      reason_of(
          R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[{"seq":1,"path":"target","mode":"new","ok":true,"ms":-1,"route":"vless"}]})") ==
      "sample: bad ms");
  CHECK(
      reason_of(
          R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[{"seq":1,"path":"target","mode":"new","ok":true,"ms":1,"route":"<script>"}]})") ==
      "sample: bad route");
  CHECK(reason_of(R"({"v":NaN})") == "unexpected character");
  CHECK(reason_of(R"({"v":01})") == "expected ',' or '}'");
  CHECK(reason_of("{\"v\":\"a\x01\"}") == "control byte in string");
  CHECK(reason_of(R"({"v":"\u00e9"})") == "non-ASCII \\u escape");
  CHECK(reason_of("{\"v\":\"" + std::string(probe_max_string + 1, 'a') + "\"}") == "string too long");
  CHECK(reason_of(std::string(probe_max_body + 1, ' ')) == "body too large");

  std::string many = R"({"v":1,"run":"a","new":0,"reuse":0,"verdict":"stall","samples":[)";
  for (std::size_t i = 0; i <= probe_max_samples; ++i) many += "0,";
  many += "0]}";
  CHECK(reason_of(many) == "too many array elements");
}

TEST_CASE(
    "target: /probe serves the page, samples can ask for close, results "
    "are POSTed",
    "[probe]") {
  const auto page = target::plan_response(get("/probe?auto=1&new=5&reuse=5"));
  CHECK(page.status == 200);
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK(page.probe_page);  // the I/O side fills in the page with its run id and token
  const std::string html = target::probe_page("abc123", "42.ff00");
  CHECK(html.find("<script>") != std::string::npos);
  CHECK(html.find("src=") == std::string::npos);  // nothing loaded from elsewhere
  CHECK(html.find("@STALL_MS@") == std::string::npos);
  CHECK(html.find("@RUN@") == std::string::npos);
  CHECK(html.find("var STALL_MS = 30;") != std::string::npos);
  CHECK(html.find("var issued = { run: 'abc123', token: '42.ff00' };") != std::string::npos);
  CHECK(target::plan_response(get("/probe/token")).probe_token);

  const auto fresh = target::plan_response(get("/generate_204?probe=k3x9&seq=2&close=1"));
  CHECK(fresh.status == 204);
  CHECK(fresh.close);
  CHECK(fresh.cors);
  const auto head = target::format_head(fresh, 0, "direct", "", false);
  CHECK(head.find("Access-Control-Expose-Headers: X-Vlessbench-Route, "
                  "Server-Timing, X-Vlessbench-Node\r\n") != std::string::npos);
  CHECK(head.find("X-Vlessbench-Node:") == std::string::npos);  // direct: no node
  CHECK(target::format_head(fresh, 0, "vless session=4 user=u", "", false, "default-ack")
            .find("X-Vlessbench-Node: default-ack\r\n") != std::string::npos);
  CHECK(head.find("Timing-Allow-Origin: *\r\n") != std::string::npos);
  const auto reused = target::plan_response(get("/generate_204?probe=k3x9&seq=3"));
  CHECK_FALSE(reused.close);
  const auto plain = target::plan_response(get("/generate_204"));
  CHECK_FALSE(plain.close);
  CHECK_FALSE(plain.cors);
  CHECK(target::format_head(plain, 0, "direct", "", true).find("Access-Control") == std::string::npos);
  CHECK(target::format_head(plain, 0, "vless session=4 user=u", "", true, "default-ack").find("X-Vlessbench-Node") ==
        std::string::npos);  // only the probe's samples carry it

  CHECK(target::plan_response(get("/probe/result")).status == 405);
  auto post = get("/probe/result", "POST");
  post.content_length = 100;
  CHECK(target::plan_response(post).probe_result);
  post.content_length = probe_max_body + 1;
  const auto big = target::plan_response(post);
  CHECK(big.status == 413);
  CHECK(big.close);
  CHECK(big.note == "probe result too large");
}

TEST_CASE(
    "target: a posted probe result becomes one probe.run line, a bad one "
    "a 400 with a reason",
    "[probe]") {
  route_info session;
  session.session_id = 18;
  session.user = "alice";
  session.client = "10.0.0.7:40000";
  target::probe_runs runs;
  const auto t = runs.issue(target::probe_client(&session, "127.0.0.1:5000"), std::chrono::steady_clock::now());
  std::string body = good_body;
  body.replace(body.find("k3x9"), 4, t.run);
  const auto none = target::handle_probe_result(body, "x", "http", "127.0.0.1:5000", &session, runs, "", "10.0.0.7");
  CHECK(none.plan.status == 403);
  CHECK(none.plan.note == "no_token");
  CHECK(none.log_line.empty());
  const auto ok = target::handle_probe_result(body, "Mozilla/5.0 test", "http", "127.0.0.1:5000", &session, runs,
                                              t.token, "10.0.0.7");
  CHECK(ok.plan.status == 200);
  CHECK(ok.plan.body == "logged run " + t.run + ": no_vless\n");  // the daemon saw none of these samples
  CHECK(ok.log_line.find(R"("event":"probe.run")") != std::string::npos);
  CHECK(ok.log_line.find(R"("user_agent":"Mozilla/5.0 test")") != std::string::npos);
  CHECK(ok.log_line.find(R"("samples_verified":0)") != std::string::npos);

  const auto bad = target::handle_probe_result("{\"v\":1", "x", "http", "127.0.0.1:5000", nullptr, runs, "", "");
  CHECK(bad.plan.status == 400);
  CHECK(bad.plan.note == "unexpected end of body");
  CHECK(bad.log_line.empty());
}

TEST_CASE("probe runs: a token is good once, for its run and client, until it expires", "[probe]") {
  using vlessbench::target::probe_runs;
  probe_runs runs;
  const auto t0 = probe_runs::clock::now();
  const auto a = runs.issue("10.0.0.7", t0);
  CHECK(a.run.size() == 16);
  CHECK(runs.redeem(a.run, "10.0.0.7", "", t0) == "no_token");
  CHECK(runs.redeem(a.run, "10.0.0.8", a.token, t0) == "bad_token");  // another client
  CHECK(runs.redeem("otherrun", "10.0.0.7", a.token, t0) == "bad_token");
  CHECK(runs.redeem(a.run, "10.0.0.7", "999999999999999." + a.token.substr(a.token.find('.') + 1), t0) == "bad_token");
  CHECK(runs.redeem(a.run, "10.0.0.7", "garbage", t0) == "bad_token");
  CHECK(runs.redeem(a.run, "10.0.0.7", a.token, t0 + probe_runs::ttl) == "expired_token");
  CHECK(runs.redeem(a.run, "10.0.0.7", a.token, t0).empty());
  CHECK(runs.redeem(a.run, "10.0.0.7", a.token, t0) == "used_token");
  CHECK(probe_runs().redeem(a.run, "10.0.0.7", runs.issue("10.0.0.7", t0).token, t0) == "bad_token");  // another key
}

TEST_CASE("probe runs: samples verified against the requests the daemon served", "[probe]") {
  using vlessbench::target::probe_runs;
  probe_runs runs;
  const auto t0 = probe_runs::clock::now();
  const auto a = runs.issue("10.0.0.7", t0);
  runs.observe(a.run, 1, {.vless = true, .session = 17, .vless_ms = 0.25}, t0);
  runs.observe(a.run, 2, {}, t0);                                     // direct
  runs.observe("neverissued", 3, {.vless = true, .session = 5}, t0);  // ignored
  probe_result r;
  r.run = a.run;
  r.samples = {probe_sample{.seq = 1, .ok = true, .route = "vless", .session = 17, .vless = 99.0},
               probe_sample{.seq = 2, .ok = true, .route = "direct"},
               probe_sample{.seq = 3, .ok = true, .route = "vless", .session = 5, .vless = 99.0},
               probe_sample{.seq = 1, .ok = true, .route = "vless", .session = 999999, .vless = 99.0}};
  CHECK(runs.verify(r) == 2);
  CHECK(r.samples[0].verified);
  CHECK(*r.samples[0].vless == 0.25);  // the daemon's own figure, not the page's
  CHECK(r.samples[1].verified);
  CHECK_FALSE(r.samples[2].verified);
  CHECK_FALSE(r.samples[3].verified);  // a session the daemon never served this request on
  const auto sum = summarize_probe(r);
  CHECK(sum.verified == 2);
  CHECK(sum.stall_samples == 0);
  CHECK(sum.verdict == "no_stall");
}
