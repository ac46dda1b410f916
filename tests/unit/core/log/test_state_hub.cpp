// core/log/state_hub (what the admin listener shows) and server/admin_views (its
// /metrics and /api/state text): counters and histograms from events, bounded
// rings and label sets, escaping. test_admin.py checks the same through a
// running daemon, with promtool and a browser.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/log/access_log.hpp"
#include "core/log/emit.hpp"
#include "core/log/state_hub.hpp"
#include "server/admin_server.hpp"
#include "server/admin_views.hpp"

using namespace vlessbench;

namespace {

session_phases phases_ms(std::int64_t tls, std::int64_t header, std::int64_t upstream) {
  session_phases p;
  p.tls_done = tls * 1000;
  p.header_complete = (tls + header) * 1000;
  p.upstream_connected = (tls + header + upstream) * 1000;
  return p;
}

vless_session_event session(std::string_view listener, const session_phases& p, bool stall,
                            std::string_view sni = "example.com") {
  return vless_session_event{.session = 7,
                             .listener = listener,
                             .user = "u",
                             .client = "127.0.0.1:5000",
                             .dest = "127.0.0.1:8080",
                             .tls_version = "TLSv1.3",
                             .sni = sni,
                             .alpn = "h2",
                             .phases = &p,
                             .stall_suspected = stall,
                             .bytes_up = 10,
                             .bytes_down = 20,
                             .close_reason = "client_eof"};
}

}  // namespace

TEST_CASE("xhttp sessions: request arrivals, POST gaps, reuse and spacing reach the page and /metrics",
          "[state_hub][xhttp]") {
  state_hub hub;
  hub.set_listeners(1, {{"vless", "xh", "127.0.0.1:8449", "nodelay=true quickack=kernel", "", "xhttp"},
                        {"vless", "k", "127.0.0.1:8443", "nodelay=true quickack=kernel", "", "tls"}});
  auto p = phases_ms(0, 41, 1);
  p.xhttp.get = 120;
  p.xhttp.first_post = 0;
  p.xhttp.post_gaps = 1;
  p.xhttp.post_gap_median = 40'500;
  p.xhttp.post_gap_max = 40'500;
  p.xhttp.reused = 1;
  auto e = session("xh", p, false);
  e.transport = "xhttp";
  e.reused = true;
  e.post_spacing = true;
  hub.session_closed(e);
  hub.session_closed(session("k", phases_ms(2, 0, 1), false));
  const hub_snapshot s = hub.snapshot();
  const listener_counters& c = s.counters.at("xh");
  CHECK(c.stalls == 0);
  CHECK(c.xhttp_reused == 1);
  CHECK(c.spacing_waits == 1);
  const phase_histogram& gaps = c.phases[static_cast<std::size_t>(hub_phase::xhttp_post_gap)];
  CHECK(gaps.count == 1);
  CHECK(gaps.sum_ms == Approx(40.5));
  CHECK(s.counters.at("k").phases[static_cast<std::size_t>(hub_phase::xhttp_post_gap)].count == 0);
  REQUIRE(s.sessions.size() == 2);
  const session_record& r = s.sessions[0];
  CHECK(*r.xhttp_get_ms == Approx(0.12));
  CHECK(*r.xhttp_first_post_ms == Approx(0));
  CHECK(*r.post_gaps == 1);
  CHECK(*r.post_gap_median_ms == Approx(40.5));
  CHECK(*r.reused);
  CHECK(r.post_spacing);
  CHECK_FALSE(s.sessions[1].post_gaps);
  CHECK_FALSE(s.sessions[1].reused);
  const std::string json = admin::format_state_json(s, "v");
  CHECK_THAT(json, Catch::Contains(R"("post_gap_max_ms":40.5)") && Catch::Contains(R"("xhttp_reused":1)") &&
                       Catch::Contains(R"("spacing_waits":1)") && Catch::Contains(R"("xhttp_post_gap")"));
  const std::string metrics = admin::format_metrics(s, "v");
  CHECK_THAT(metrics, Catch::Contains(R"(vlessbench_xhttp_reused_sessions_total{listener="xh"} 1)"));
  CHECK_THAT(metrics, Catch::Contains(R"(vlessbench_phase_seconds_count{listener="xh",phase="xhttp_post_gap"} 1)"));
  // A listener without packet-up sessions has no such series, and a non-xhttp one no reuse count.
  CHECK_THAT(metrics, !Catch::Contains(R"(listener="k",phase="xhttp_post_gap")") &&
                          !Catch::Contains(R"(vlessbench_xhttp_reused_sessions_total{listener="k"})"));
}

TEST_CASE("sessions feed counters, histograms and the ring", "[state_hub]") {
  state_hub hub;
  hub.set_listeners(3, {{"vless", "k", "127.0.0.1:8443", "nodelay=true quickack=kernel", "", "tls"}});
  const auto slow = phases_ms(2, 41, 1);
  const auto fast = phases_ms(2, 0, 1);
  hub.session_closed(session("k", slow, true));
  hub.session_closed(session("k", fast, false));
  const hub_snapshot s = hub.snapshot();
  CHECK(s.generation == 3);
  REQUIRE(s.counters.count("k") == 1);
  const listener_counters& c = s.counters.at("k");
  CHECK(c.sessions == 2);
  CHECK(c.stalls == 1);
  CHECK(c.bytes_up == 20);
  CHECK(c.bytes_down == 40);
  const phase_histogram& header = c.phases[static_cast<std::size_t>(hub_phase::vless_header)];
  CHECK(header.count == 2);
  CHECK(header.sum_ms == Approx(41));
  CHECK(header.buckets[0] == 1);  // 0 ms <= 0.5
  CHECK(header.buckets[8] == 1);  // 41 ms <= 50
  REQUIRE(s.sessions.size() == 2);
  CHECK(s.sessions[0].stall);
  CHECK(*s.sessions[0].header_ms == Approx(41));
  CHECK(s.sessions[0].sni == "example.com");
  CHECK(s.sessions[0].quickack == "kernel");
}

TEST_CASE("rings, strings, listeners and reasons are bounded", "[state_hub]") {
  state_hub hub;
  const auto p = phases_ms(1, 1, 1);
  const std::string long_sni(5000, 'x');
  for (std::size_t i = 0; i < state_hub::session_ring + 50; ++i) hub.session_closed(session("k", p, false, long_sni));
  for (int i = 0; i < 100; ++i) {
    const std::string reason = "reason" + std::to_string(i);
    hub.rejected(vless_reject_event{.listener = "k", .client = "c", .reason = reason});
  }
  for (std::size_t i = 0; i < hub_max_listeners + 10; ++i) {
    const std::string name = "l" + std::to_string(i);
    hub.rejected(vless_reject_event{.listener = name, .client = "c", .reason = "bad_version"});
  }
  for (std::size_t i = 0; i < state_hub::reload_ring + 5; ++i)
    hub.reloaded(config_reload_event{.ok = i % 2 == 0, .generation = i, .error = "e"});
  hub_snapshot s = hub.snapshot();
  CHECK(s.sessions.size() == state_hub::session_ring);
  CHECK(s.sessions.front().sni.size() == hub_max_string);
  CHECK(s.counters.at("k").sessions == state_hub::session_ring + 50);
  CHECK(s.counters.at("k").rejects.size() == hub_max_reasons + 1);
  CHECK(s.counters.at("k").rejects.at("other") == 100 - hub_max_reasons);
  CHECK(s.counters.size() == hub_max_listeners);
  CHECK(s.reloads.size() == state_hub::reload_ring);
  CHECK(s.reloads_ok + s.reloads_failed == state_hub::reload_ring + 5);
  // A reload drops the counters of listeners the config no longer has.
  hub.set_listeners(2, {{"vless", "k", "127.0.0.1:8443", "", "", "tls"}});
  s = hub.snapshot();
  CHECK(s.counters.size() == 1);
  CHECK(s.counters.count("k") == 1);
}

TEST_CASE("/metrics: families, cumulative buckets and escaped label values", "[state_hub]") {
  state_hub hub;
  const auto p = phases_ms(2, 41, 1);
  hub.session_closed(session("we\"ird\\name\n", p, true));
  hub.rejected(vless_reject_event{.listener = "k", .client = "c", .reason = "unknown_user"});
  hub_snapshot s = hub.snapshot();
  s.open_sessions = 4;
  const std::string m = admin::format_metrics(s, "1.2.3");
  CHECK(admin::escape_label("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(m.find("# TYPE vlessbench_phase_seconds histogram\n") != std::string::npos);
  CHECK(m.find("vlessbench_build_info{version=\"1.2.3\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_open_sessions 4\n") != std::string::npos);
  CHECK(m.find("vlessbench_rejects_total{listener=\"k\",reason=\"unknown_"
               "user\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_sessions_total{listener=\"we\\\"ird\\\\name\\n\"} 1\n") != std::string::npos);
  CHECK(m.find("phase=\"vless_header\",le=\"0.04\"} 0\n") != std::string::npos);
  CHECK(m.find("phase=\"vless_header\",le=\"0.05\"} 1\n") != std::string::npos);
  CHECK(m.find("phase=\"vless_header\",le=\"+Inf\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_phase_seconds_sum{listener=\"we\\\"ird\\\\name\\n\","
               "phase=\"vless_header\"} 0.041\n") != std::string::npos);
}

TEST_CASE("/metrics: UDP refusals by listener and reason, bounded", "[state_hub]") {
  state_hub hub;
  hub.udp_refused("udp", "reflector_port");
  hub.udp_refused("udp", "reflector_port", 4);
  hub.udp_refused("dns", "dns_response");
  for (std::size_t i = 0; i < hub_max_reasons + 5; ++i) hub.udp_refused("dns", "r" + std::to_string(i));
  for (std::size_t i = 0; i < hub_max_listeners + 5; ++i) hub.udp_refused("l" + std::to_string(i), "x");
  const hub_snapshot s = hub.snapshot();
  CHECK(s.udp_refused.size() == hub_max_listeners);
  CHECK(s.udp_refused.at("dns").size() == hub_max_reasons + 1);  // the rest in "other"
  CHECK(s.udp_refused.at("dns").at("other") == 6);
  const std::string m = admin::format_metrics(s, "1.2.3");
  CHECK(m.find("# TYPE vlessbench_udp_refused_total counter\n") != std::string::npos);
  CHECK(m.find("vlessbench_udp_refused_total{listener=\"udp\",reason=\"reflector_port\"} 5\n") != std::string::npos);
  CHECK(m.find("vlessbench_udp_refused_total{listener=\"dns\",reason=\"dns_response\"} 1\n") != std::string::npos);
  const auto j = nlohmann::json::parse(admin::format_state_json(s, "1.2.3"));
  CHECK(j["udp_refused"]["udp"]["reflector_port"] == 5);
}

TEST_CASE("/api/state: JSON of everything, hostile strings kept as data", "[state_hub]") {
  state_hub hub;
  const auto p = phases_ms(1, 1, 1);
  const std::string sni = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>\xff";
  hub.session_closed(session("k", p, false, sni));
  probe_record r;
  r.user_agent = "</script><b>ua</b>";
  hub.probe_run(r);
  const auto j = nlohmann::json::parse(admin::format_state_json(hub.snapshot(), "1.2.3"));
  CHECK(j["sessions"][0]["sni"] == "<script>alert(1)</script>\"><img src=x onerror=alert(2)>\xef\xbf\xbd");
  CHECK(j["sessions"][0]["ja4"].get<std::string>().empty());
  CHECK(j["probes"][0]["user_agent"] == "</script><b>ua</b>");
  CHECK(j["version"] == "1.2.3");
}

TEST_CASE("token_matches compares whole tokens", "[state_hub]") {
  CHECK(admin::token_matches("0123456789abcdef", "0123456789abcdef"));
  CHECK_FALSE(admin::token_matches("0123456789abcdeF", "0123456789abcdef"));
  CHECK_FALSE(admin::token_matches("0123456789abcde", "0123456789abcdef"));
  CHECK_FALSE(admin::token_matches("", "0123456789abcdef"));
}

TEST_CASE("sessions closing on several threads while snapshots are taken lose nothing", "[state_hub]") {
  // The daemon's worker threads close sessions while the admin listener reads (TSan: build-tsan).
  state_hub hub;
  hub.set_listeners(1, {{"vless", "k", "127.0.0.1:8443", "", "", "tls"}});
  constexpr int threads = 4, per_thread = 500;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&hub] {
      const auto p = phases_ms(1, 2, 3);
      for (int i = 0; i < per_thread; ++i) {
        hub.session_closed(session("k", p, i % 2 == 0));
        hub.rejected(vless_reject_event{.listener = "k", .client = "c", .reason = "no_header"});
      }
    });
  std::size_t seen = 0;
  for (int i = 0; i < 50; ++i) seen = std::max(seen, hub.snapshot().sessions.size());
  for (auto& w : workers) w.join();
  const hub_snapshot s = hub.snapshot();
  CHECK(s.counters.at("k").sessions == threads * per_thread);
  CHECK(s.counters.at("k").stalls == threads * per_thread / 2);
  CHECK(s.counters.at("k").rejects.at("no_header") == threads * per_thread);
  CHECK(s.sessions.size() == state_hub::session_ring);
  CHECK(seen <= state_hub::session_ring);
}

TEST_CASE("targets' answers, UDP and DNS listeners, and stalls before a policy change", "[state_hub]") {
  state_hub hub;
  const std::string kernel = "nodelay=true quickack=kernel", quick = "nodelay=true quickack=on";
  hub.set_listeners(1, {{"vless", "k", "0.0.0.0:8443", kernel, kernel, "tls"},
                        {"target", "http", "0.0.0.0:8080", kernel, "", ""},
                        {"udp", "udp", "0.0.0.0:8083", "", "", ""},
                        {"dns", "dns", "0.0.0.0:8053", "", "", ""}});
  hub.target_answered("http", false, 1, 0, 100);
  hub.target_answered("http", true, 1, 5, 200);
  hub.target_answered("udp", true, 4, 40, 80);
  const auto slow = phases_ms(2, 41, 1);
  hub.session_closed(session("k", slow, true));
  hub.session_closed(session("k", slow, true));
  auto s = hub.snapshot();
  CHECK(s.counters.at("http").answers == 2);
  CHECK(s.counters.at("http").answers_vless == 1);
  CHECK(s.counters.at("http").bytes_down == 300);
  CHECK(s.counters.at("udp").answers == 4);
  CHECK(s.counters.at("k").policy_changed_unix_ms == 0);

  // A reload that keeps every policy notes nothing; one that changes k's notes its stalls then.
  hub.set_listeners(2, s.listeners);
  CHECK(hub.snapshot().counters.at("k").policy_changed_unix_ms == 0);
  hub.set_listeners(3, {{"vless", "k", "0.0.0.0:8443", quick, quick, "tls"},
                        {"target", "http", "0.0.0.0:8080", kernel, "", ""},
                        {"udp", "udp", "0.0.0.0:8083", "", "", ""},
                        {"dns", "dns", "0.0.0.0:8053", "", "", ""}});
  s = hub.snapshot();
  CHECK(s.counters.at("k").policy_changed_unix_ms > 0);
  CHECK(s.counters.at("k").stalls_before_policy_change == 2);
  CHECK(s.counters.at("http").policy_changed_unix_ms == 0);

  const auto j = nlohmann::json::parse(admin::format_state_json(s, "test"));
  REQUIRE(j["listeners"].size() == 4);
  CHECK(j["listeners"][2]["kind"] == "udp");
  CHECK(j["listeners"][3]["kind"] == "dns");
  CHECK(j["listeners"][3]["answers"] == 0);  // nothing reached it: zeros, not missing fields
  CHECK(j["listeners"][1]["answers_vless"] == 1);
  CHECK(j["listeners"][0]["stalls_before_policy_change"] == 2);
  CHECK(j["listeners"][1]["policy_changed_unix_ms"].is_null());

  const std::string m = admin::format_metrics(s, "test");
  CHECK(m.find("vlessbench_target_answers_total{listener=\"http\",route=\"vless\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_target_answers_total{listener=\"http\",route=\"direct\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_target_answers_total{listener=\"k\"") == std::string::npos);
  CHECK(m.find("vlessbench_listener_info{listener=\"k\",kind=\"vless\",listen=\"0.0.0.0:8443\",policy=\"" + quick +
               "\",upstream_policy=\"" + quick + "\",transport=\"tls\"} 1\n") != std::string::npos);
  CHECK(m.find("vlessbench_listener_info{listener=\"dns\",kind=\"dns\"") != std::string::npos);
}

TEST_CASE("one emit: a target's answer is its access-log line and the listener's counters", "[state_hub]") {
  state_hub hub;
  hub.set_listeners(1, {{"target", "http", "0.0.0.0:8080", "", "", ""},
                        {"udp", "udp", "0.0.0.0:8083", "", "", ""},
                        {"dns", "dns", "0.0.0.0:8053", "", "", ""},
                        {"banner", "b", "0.0.0.0:8084", "", "", ""}});
  const auto file = std::filesystem::temp_directory_path() / ("vlessbench-emit-" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(file);
  route_info via;
  via.session_id = 9;
  {
    access_log log;
    log.open(file.string());
    event_emitter events(log, hub);
    events.emit(http_request_event{.listener = "http", .peer = "127.0.0.1:1", .route = &via, .status = 200, .bytes = 7},
                {.bytes_up = 3, .bytes_down = 90});
    events.emit(http_request_event{.listener = "http", .peer = "127.0.0.1:2", .status = 400, .error = "bad_request"},
                {.bytes_down = 50});
    events.emit(
        udp_packet_event{.listener = "udp", .peer = "127.0.0.1:3", .packets_in = 4, .bytes_in = 40, .bytes_out = 80});
    events.emit(dns_query_event{.listener = "dns", .peer = "127.0.0.1:4", .route = &via, .rcode = "NOERROR"},
                {.bytes_down = 60});
    events.emit(banner_connection_event{.listener = "b", .peer = "127.0.0.1:5", .bytes_in = 2, .bytes_out = 30});
    REQUIRE(log.flush(std::chrono::seconds(5)));
  }
  std::ifstream in(file);
  std::vector<std::string> events;
  for (std::string line; std::getline(in, line);) events.push_back(nlohmann::json::parse(line).value("event", ""));
  std::filesystem::remove(file);
  CHECK(events ==
        std::vector<std::string>{"http.request", "http.request", "udp.packet", "dns.query", "banner.connection"});
  const auto s = hub.snapshot();
  CHECK(s.counters.at("http").answers == 2);
  CHECK(s.counters.at("http").answers_vless == 1);
  CHECK(s.counters.at("http").bytes_up == 3);
  CHECK(s.counters.at("http").bytes_down == 140);
  CHECK(s.counters.at("udp").answers == 4);
  CHECK(s.counters.at("udp").answers_vless == 0);
  CHECK(s.counters.at("dns").answers_vless == 1);
  CHECK(s.counters.at("b").bytes_down == 30);
}
