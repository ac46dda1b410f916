#include <catch2/catch.hpp>

#include <string>

#include "core/wire/route_header.hpp"
#include "core/wire/session_info.hpp"

using namespace vlessbench;

TEST_CASE("udp echo trailer: format and parse round trip", "[udp_trailer]") {
  route_info s;
  s.session_id = 42;
  s.user = "alice";
  const std::string via = format_udp_echo("ping", "udp", &s);
  CHECK(via == "ping\nVLESSBENCH-UDP udp vless session=42 user=alice");
  auto r = parse_udp_echo(via);
  REQUIRE(r.complete());
  CHECK(r.consumed == via.size());
  CHECK(r.value.payload == "ping");
  CHECK(r.value.listener == "udp");
  CHECK(r.value.route.kind == route_kind::vless);
  CHECK(r.value.route.session == 42);
  CHECK(r.value.route.user == "alice");

  const std::string direct = format_udp_echo("", "echo", nullptr);
  CHECK(direct == "\nVLESSBENCH-UDP echo direct");
  r = parse_udp_echo(direct);
  REQUIRE(r.complete());
  CHECK(r.value.payload.empty());
  CHECK(r.value.route.kind == route_kind::direct);
  CHECK_FALSE(r.value.route.session);
}

TEST_CASE("udp echo trailer: a datagram that looks like one keeps its bytes",
          "[udp_trailer]") {
  // The last marker is the daemon's: a payload that carries one itself is
  // echoed whole.
  const std::string tricky = "a\nVLESSBENCH-UDP x vless session=1 user=u";
  const std::string echo =
      format_udp_echo(tricky, "udp", nullptr); // payload is a view into it
  const auto r = parse_udp_echo(echo);
  REQUIRE(r.complete());
  CHECK(r.value.payload == tricky);
  CHECK(r.value.route.kind == route_kind::direct);
}

TEST_CASE("udp echo trailer: the echo never exceeds the largest datagram",
          "[udp_trailer]") {
  route_info s;
  s.session_id = 7;
  s.user = "u";
  const std::string big(max_udp_echo, 'x');
  const std::string echo = format_udp_echo(big, "udp", &s);
  CHECK(echo.size() == max_udp_echo);
  const auto r = parse_udp_echo(echo);
  REQUIRE(r.complete());
  CHECK(
      r.value.payload ==
      std::string(max_udp_echo - (echo.size() - r.value.payload.size()), 'x'));
  CHECK(r.value.route.session == 7);
}

TEST_CASE("udp echo trailer: anything else is invalid", "[udp_trailer]") {
  CHECK(parse_udp_echo("").invalid());
  CHECK(parse_udp_echo("plain datagram").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP udp").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP udp sideways").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP  direct").invalid());
}

TEST_CASE("route header: a Mux.Cool sub-connection names its sub, and reads back", "[udp_trailer]") {
  route_info s;
  s.session_id = 42;
  s.sub = 3;
  s.user = "alice";
  s.transport = "ws";
  const std::string h = format_route_header(&s);
  CHECK(h == "vless session=42 sub=3 user=alice transport=ws");
  const route_label l = parse_route_header(h);
  CHECK(l.kind == route_kind::vless);
  CHECK(l.session == 42u);
  CHECK(l.sub == 3u);
  CHECK(l.user == "alice");
  CHECK(l.transport == "ws");
  // Without a sub (sub 0): the line as it always was, and no sub read back.
  s.sub = 0;
  CHECK(format_route_header(&s) == "vless session=42 user=alice transport=ws");
  CHECK_FALSE(parse_route_header(format_route_header(&s)).sub.has_value());
  // A malformed or zero sub is ignored, the rest still read.
  CHECK_FALSE(parse_route_header("vless session=1 sub=x user=u").sub.has_value());
  CHECK_FALSE(parse_route_header("vless session=1 sub=0 user=u").sub.has_value());
  CHECK(parse_route_header("vless session=1 sub=x user=u").user == "u");
  // The UDP echo's trailer carries it too.
  s.sub = 7;
  const std::string echo = format_udp_echo("ping", "udp", &s);
  CHECK(echo == "ping\nVLESSBENCH-UDP udp vless session=42 sub=7 user=alice transport=ws");
  const auto r = parse_udp_echo(echo);
  REQUIRE(r.complete());
  CHECK(r.value.route.sub == 7u);
  CHECK(r.value.route.session == 42u);
}
