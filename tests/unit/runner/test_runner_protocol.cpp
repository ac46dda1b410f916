#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "bytes.hpp"
#include "runner/measure.hpp"
#include "runner/proxy_protocol.hpp"
#include "runner/sample.hpp"
#include "core/wire/server_timing.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;
using namespace vlessbench::runner;

TEST_CASE("SOCKS5 requests follow RFC 1928", "[runner]") {
  CHECK(socks5_greeting() == bytes({5, 1, 0}));
  CHECK(socks5_connect_request("127.0.0.1", 8080) == bytes({5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90}));
  CHECK(socks5_connect_request("example.com", 80) == bytes({5, 1, 0, 3, 11}) + "example.com" + bytes({0, 80}));
  const auto v6 = socks5_connect_request("::1", 443);
  REQUIRE(v6.size() == 4 + 16 + 2);
  CHECK(v6[3] == 4);
  CHECK(v6[19] == 1);
  CHECK(v6.substr(20) == bytes({1, 0xbb}));
}

TEST_CASE("SOCKS5 replies: need more, success, failure codes", "[runner]") {
  CHECK(parse_socks5_method_reply(bytes({5})).need_more());
  CHECK(parse_socks5_method_reply(bytes({5, 0})).complete());
  auto auth = parse_socks5_method_reply(bytes({5, 0xff}));
  CHECK(auth.invalid());
  CHECK(auth.reason == "socks5: server requires authentication");

  const auto ok = bytes({5, 0, 0, 1, 127, 0, 0, 1, 0x1f, 0x90});
  for (std::size_t cut = 0; cut < ok.size(); ++cut) CHECK(parse_socks5_connect_reply(ok.substr(0, cut)).need_more());
  auto r = parse_socks5_connect_reply(ok + "HTTP/1.1");
  REQUIRE(r.complete());
  CHECK(r.consumed == 10);  // the bytes after the reply belong to the tunnel
  auto dom = parse_socks5_connect_reply(bytes({5, 0, 0, 3, 3}) + "abc" + bytes({0, 1}));
  REQUIRE(dom.complete());
  CHECK(dom.consumed == 10);

  auto refused = parse_socks5_connect_reply(bytes({5, 5, 0, 1, 0}));
  CHECK(refused.invalid());
  CHECK(refused.reason == "socks5: connection refused");
  CHECK(parse_socks5_connect_reply(bytes({4, 0, 0, 1, 0, 0, 0, 0, 0, 0})).invalid());
  CHECK(parse_socks5_connect_reply(bytes({5, 0, 0, 9, 0, 0, 0, 0, 0, 0})).invalid());
}

TEST_CASE("HTTP CONNECT and GET requests", "[runner]") {
  CHECK(format_connect_request("127.0.0.1:8080") == "CONNECT 127.0.0.1:8080 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
  target_url t;
  t.host = "127.0.0.1";
  t.port = 8080;
  t.path = "/generate_204";
  CHECK(format_get(t, "abc123", 42, "clash") ==
        "GET /generate_204 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: vlessbench\r\n"
        "X-Vlessbench-Run: abc123\r\nX-Vlessbench-Seq: 42\r\nX-Vlessbench-Path: clash\r\n\r\n");
}

TEST_CASE("route header", "[runner]") {
  CHECK(parse_route_header("direct").kind == route_kind::direct);
  const auto v = parse_route_header("vless session=17 user=default");
  CHECK(v.kind == route_kind::vless);
  REQUIRE(v.session);
  CHECK(*v.session == 17);
  CHECK(v.user == "default");
  const auto bare = parse_route_header("vless");
  CHECK(bare.kind == route_kind::vless);
  CHECK_FALSE(bare.session);
  CHECK(parse_route_header("vlessx session=1").kind == route_kind::unknown);
  CHECK(parse_route_header("").kind == route_kind::unknown);
  CHECK_FALSE(parse_route_header("vless session=x1 user=a").session);
}

TEST_CASE("Server-Timing header", "[runner]") {
  const auto t = parse_server_timing("tls;dur=1.234, vless;dur=0.050, resolve;dur=0.010, upstream;dur=0.080");
  REQUIRE(t.tls);
  CHECK(*t.tls == Approx(1.234));
  CHECK(*t.vless == Approx(0.05));
  CHECK(*t.resolve == Approx(0.01));
  CHECK(*t.upstream == Approx(0.08));

  const auto u = parse_server_timing("vless;desc=\"wait\";dur=41.5,tls, cache;dur=3");
  CHECK_FALSE(u.tls);  // no duration given
  REQUIRE(u.vless);
  CHECK(*u.vless == Approx(41.5));
  CHECK_FALSE(u.upstream);
  CHECK_FALSE(parse_server_timing("vless;dur=abc").vless);
  CHECK_FALSE(refused_server_timing("vless;desc=\"wait\";dur=41.5,tls, cache;dur=3"));
}

TEST_CASE("Server-Timing: nan, inf and negative durations are refused with a reason", "[runner]") {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "-1", "-1e29", "1e999"}) {
    INFO(bad);
    const std::string value = std::string("tls;dur=1.5, vless;dur=") + bad + ", upstream;dur=0.1";
    const auto t = parse_server_timing(value);
    CHECK_FALSE(t.vless);
    REQUIRE(t.tls);  // the sound phases are kept
    CHECK(*t.tls == Approx(1.5));
    CHECK(t.upstream);
    CHECK(refused_server_timing(value) == std::string("vless;dur=") + bad + " is not a finite duration >= 0");
  }
  CHECK_FALSE(refused_server_timing("tls;dur=0, vless;dur=-0"));
  CHECK_FALSE(refused_server_timing("cache;dur=nan"));  // not a phase: ignored as before
  CHECK(refused_server_timing("tls;dur=nan, vless;dur=-1") == "tls;dur=nan is not a finite duration >= 0");
  CHECK(refused_server_timing("upgrade;dur=" + std::string(100, '9') + "e9999")->size() < 80);
}

TEST_CASE("route header and Server-Timing: what the target writes, the runner reads back", "[route]") {
  CHECK(parse_route_header(format_route_header(nullptr)).kind == route_kind::direct);
  route_info info;
  info.session_id = 18446744073709551615ULL;
  info.user = "alice";
  const auto label = parse_route_header(format_route_header(&info));
  CHECK(label.kind == route_kind::vless);
  REQUIRE(label.session);
  CHECK(*label.session == info.session_id);
  CHECK(label.user == "alice");

  info.phases.tls_done = 1500;
  info.phases.header_complete = 43100;  // a stall
  info.phases.resolved = 43200;
  info.phases.upstream_connected = 43350;
  const auto t = parse_server_timing(format_server_timing(info.phases));
  REQUIRE(t.tls);
  CHECK(*t.tls == Approx(1.5));
  REQUIRE(t.vless);
  CHECK(*t.vless == Approx(41.6));
  CHECK(*t.vless >= stall_threshold_ms);
  CHECK(*t.resolve == Approx(0.1));
  CHECK(*t.upstream == Approx(0.15));
  CHECK(format_server_timing(session_phases{}).empty());  // nothing reached, nothing said
  // A gRPC stream: TLS done before its clock (tls_done 0): no tls phase named, the others kept.
  session_phases grpc;
  grpc.tls_done = 0;
  grpc.upgrade_done = 120;
  grpc.header_complete = 170;
  const auto g = parse_server_timing(format_server_timing(grpc));
  CHECK_FALSE(g.tls);
  REQUIRE(g.upgrade);
  CHECK(*g.upgrade == Approx(0.12));
  REQUIRE(g.vless);
  CHECK(*g.vless == Approx(0.05));
  CHECK_FALSE(t.ack);
  const auto with_ack = format_server_timing(info.phases, "on");
  CHECK_THAT(with_ack, Catch::EndsWith(", ack;desc=on"));
  const auto a = parse_server_timing(with_ack);
  REQUIRE(a.ack);
  CHECK(*a.ack == "on");
  CHECK(*a.vless == Approx(41.6));  // the other metrics unchanged
  CHECK(*parse_server_timing("ack;desc=\"kernel\"").ack == "kernel");
  CHECK_FALSE(a.ja4);
  const auto with_ja4 = format_server_timing(info.phases, "on", "t13d1516h2_8daaf6152771_e5627efa2ab1");
  CHECK_THAT(with_ja4, Catch::EndsWith(", ack;desc=on, ja4;desc=\"t13d1516h2_8daaf6152771_e5627efa2ab1\""));
  const auto j = parse_server_timing(with_ja4);
  CHECK_FALSE(j.generation);
  // The config generation the session was accepted under, for `compare` across a reload.
  const auto with_gen = format_server_timing(info.phases, "on", "", 3);
  CHECK_THAT(with_gen, Catch::EndsWith(", ack;desc=on, gen;desc=3"));
  REQUIRE(parse_server_timing(with_gen).generation);
  CHECK(*parse_server_timing(with_gen).generation == 3);
  CHECK_FALSE(parse_server_timing("gen;desc=x").generation);
  CHECK_FALSE(parse_server_timing("gen;desc=0").generation);
  REQUIRE(j.ja4);
  CHECK(*j.ja4 == "t13d1516h2_8daaf6152771_e5627efa2ab1");
  CHECK(*j.ack == "on");
  CHECK(*j.upstream == Approx(0.15));
  CHECK(format_server_timing(session_phases{}, {}, "t12i000000_000000000000_000000000000") ==
        "ja4;desc=\"t12i000000_000000000000_000000000000\"");
}

TEST_CASE("Server-Timing carries an XHTTP session's request arrivals and POST gaps", "[runner][xhttp]") {
  session_phases p;
  p.tls_done = 0;
  p.upgrade_done = 150;
  p.header_complete = 40'600;
  p.xhttp.get = 150;
  p.xhttp.first_post = 0;
  p.xhttp.post_gaps = 2;
  p.xhttp.post_gap_median = 40'100;
  p.xhttp.post_gap_max = 40'300;
  p.xhttp.reused = 0;
  const std::string h = format_server_timing(p, "kernel");
  CHECK_THAT(h, Catch::EndsWith("ack;desc=kernel, xget;dur=0.150, xpost;dur=0.000, xgaps;desc=2, xgap;dur=40.100, "
                                "xgapmax;dur=40.300, xreuse;desc=0"));
  const auto t = parse_server_timing(h);
  REQUIRE(t.xget);
  CHECK(*t.xget == Approx(0.15));
  CHECK(*t.xpost == Approx(0));
  CHECK(*t.xgaps == 2);
  CHECK(*t.xgap == Approx(40.1));
  CHECK(*t.xgapmax == Approx(40.3));
  CHECK(*t.xreuse == false);
  CHECK(*t.vless == Approx(40.45));  // the other phases unchanged
  // stream-one: one POST, no GET, no gaps, on a shared HTTP/2 connection.
  session_phases one;
  one.xhttp.first_post = 0;
  one.xhttp.reused = 1;
  const auto o = parse_server_timing(format_server_timing(one));
  CHECK_FALSE(o.xget);
  CHECK_FALSE(o.xgaps);
  CHECK_FALSE(o.xgap);
  CHECK(*o.xreuse);
  CHECK(format_server_timing(session_phases{}).find("x") == std::string::npos);  // not XHTTP: none
  CHECK_FALSE(parse_server_timing("xgaps;desc=-1, xreuse;desc=yes").xgaps);
  CHECK_FALSE(parse_server_timing("xreuse;desc=yes").xreuse);
  CHECK(refused_server_timing("xgap;dur=nan").value_or("") == "xgap;dur=nan is not a finite duration >= 0");
}

TEST_CASE("a header wait is packet-up's POST spacing only past the first POST and with a gap that long",
          "[runner][xhttp]") {
  // The header completed 40.6 ms into the session, its first POST at 0.1, a gap of 40.3: spacing.
  CHECK(wait_is_post_spacing(0.15, 40.45, 0.1, 40.3));
  // No gap that long: the wait is something else (Nagle, delayed ACK).
  CHECK_FALSE(wait_is_post_spacing(0.15, 40.45, 0.1, 5.0));
  CHECK_FALSE(wait_is_post_spacing(0.15, 40.45, std::nullopt, std::nullopt));
  // The first POST itself came 40 ms late: no spacing between POSTs explains that.
  CHECK_FALSE(wait_is_post_spacing(0.15, 40.45, 40.0, 40.3));
}

TEST_CASE("route mismatch rules", "[runner]") {
  CHECK(is_route_mismatch(path_kind::direct, route_kind::vless));
  CHECK_FALSE(is_route_mismatch(path_kind::direct, route_kind::direct));
  CHECK(is_route_mismatch(path_kind::http_connect, route_kind::direct));
  // A port forward may or may not lead through VLESS: its route is reported, never flagged.
  CHECK_FALSE(is_route_mismatch(path_kind::forward, route_kind::direct));
  // A TUN path is dialled like direct but must arrive through VLESS: the reverse of direct.
  CHECK(is_route_mismatch(path_kind::tun, route_kind::direct));
  CHECK_FALSE(is_route_mismatch(path_kind::tun, route_kind::vless));
  CHECK_FALSE(is_route_mismatch(path_kind::forward, route_kind::vless));
  // So may a TLS terminator (HAProxy in front of the target, or of a client's entry).
  CHECK_FALSE(is_route_mismatch(path_kind::tls, route_kind::direct));
  CHECK_FALSE(is_route_mismatch(path_kind::tls, route_kind::vless));
  CHECK(is_route_mismatch(path_kind::socks5, route_kind::direct));
  CHECK(is_route_mismatch(path_kind::vless, route_kind::direct));
  CHECK_FALSE(is_route_mismatch(path_kind::vless, route_kind::vless));
  CHECK_FALSE(is_route_mismatch(path_kind::http_connect, route_kind::unknown));
  CHECK_FALSE(is_route_mismatch(path_kind::direct, route_kind::unknown));
}

TEST_CASE("round order shuffles are permutations replayed by the seed", "[runner]") {
  std::vector<std::size_t> a(6), b(6);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  stats::prng ra(9), rb(9);
  bool moved = false;
  for (int round = 0; round < 20; ++round) {
    shuffle_order(a, ra);
    shuffle_order(b, rb);
    CHECK(a == b);
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});
    if (a != std::vector<std::size_t>{0, 1, 2, 3, 4, 5}) moved = true;
  }
  CHECK(moved);
}

TEST_CASE("banner line: format and parse round-trip, partial input, refusals", "[runner]") {
  route_info session;
  session.session_id = 31;
  session.user = "default";
  const std::string relayed = format_banner_line("banner", &session);
  CHECK(relayed == "VLESSBENCH-BANNER banner vless session=31 user=default\r\n");
  const auto r = parse_banner_line(relayed + "echoed");
  REQUIRE(r.complete());
  CHECK(r.consumed == relayed.size());
  CHECK(r.value.listener == "banner");
  CHECK(r.value.route.kind == route_kind::vless);
  CHECK(r.value.route.session == 31u);
  CHECK(r.value.route.user == "default");

  const auto direct = parse_banner_line(format_banner_line("b2", nullptr));
  REQUIRE(direct.complete());
  CHECK(direct.value.route.kind == route_kind::direct);
  CHECK(direct.value.listener == "b2");

  CHECK(parse_banner_line("").need_more());
  CHECK(parse_banner_line("VLESS").need_more());
  CHECK(parse_banner_line(relayed.substr(0, relayed.size() - 1)).need_more());
  CHECK(parse_banner_line("SSH-2.0-OpenSSH\r\n").invalid());
  CHECK(parse_banner_line("VLESSBENCH-BANNER \r\n").invalid());
  CHECK(parse_banner_line("VLESSBENCH-BANNER b direct\x01\r\n").invalid());
  CHECK(parse_banner_line("VLESSBENCH-BANNER " + std::string(300, 'x')).invalid());

  session.user = std::string(400, 'u');  // capped, still one parseable line
  const std::string capped = format_banner_line("banner", &session);
  CHECK(capped.size() == max_banner_line);
  CHECK(parse_banner_line(capped).complete());
}

TEST_CASE("socks5: UDP ASSOCIATE request and the relay address of its reply", "[runner]") {
  CHECK(socks5_udp_associate_request() == bytes({5, 3, 0, 1, 0, 0, 0, 0, 0, 0}));
  const std::string v4 = bytes({5, 0, 0, 1, 127, 0, 0, 1, 0x9c, 0x40});
  const auto r = parse_socks5_connect_reply(v4);
  REQUIRE(r.complete());
  const auto b = socks5_reply_bound(v4.substr(0, r.consumed));
  CHECK(b.host == "127.0.0.1");
  CHECK(b.port == 40000);
  std::string v6 = bytes({5, 0, 0, 4});
  v6 += std::string(15, '\0') + bytes({1, 0, 53});
  CHECK(socks5_reply_bound(v6).host == "::1");
  CHECK(socks5_reply_bound(v6).port == 53);
  const std::string named = bytes({5, 0, 0, 3, 5}) + "relay" + bytes({0, 7});
  CHECK(socks5_reply_bound(named).host == "relay");
  CHECK(socks5_reply_bound(named).port == 7);
  CHECK(parse_socks5_connect_reply(bytes({5, 7, 0, 1, 0, 0, 0, 0, 0, 0})).reason == "socks5: command not supported");
}
