#include <catch2/catch.hpp>

#include <string>

#include "core/wire/route_header.hpp"
#include "core/wire/session_info.hpp"

using namespace vlessbench;

namespace {
// A datagram as a client sends it: its payload, then room for the trailer.
std::string padded(std::string_view payload) { return std::string(payload) + std::string(udp_echo_room, '.'); }
}  // namespace

TEST_CASE("udp echo trailer: format and parse round trip", "[udp_trailer]") {
  route_info s;
  s.session_id = 42;
  s.user = "alice";
  const std::string trailer = "\nVLESSBENCH-UDP udp vless session=42 user=alice";
  CHECK(udp_echo_trailer_size("udp", &s) == trailer.size());
  const std::string asked = padded("ping");
  const auto via = format_udp_echo(asked, "udp", &s);
  CHECK(via.form == udp_echo_form::full);
  CHECK(via.bytes.size() == asked.size());  // never longer than the datagram
  CHECK(via.bytes == asked.substr(0, asked.size() - trailer.size()) + trailer);
  auto r = parse_udp_echo(via.bytes);
  REQUIRE(r.complete());
  CHECK(r.consumed == via.bytes.size());
  CHECK(r.value.payload.substr(0, 4) == "ping");
  CHECK(r.value.payload.size() == asked.size() - trailer.size());
  CHECK(r.value.listener == "udp");
  CHECK(r.value.route.kind == route_kind::vless);
  CHECK(r.value.route.session == 42);
  CHECK(r.value.route.user == "alice");

  // Exactly the trailer's size: all of it trailer.
  const std::string direct_trailer = "\nVLESSBENCH-UDP echo direct";
  const auto direct = format_udp_echo(std::string(direct_trailer.size(), 'x'), "echo", nullptr);
  CHECK(direct.bytes == direct_trailer);
  r = parse_udp_echo(direct.bytes);
  REQUIRE(r.complete());
  CHECK(r.value.payload.empty());
  CHECK(r.value.route.kind == route_kind::direct);
  CHECK_FALSE(r.value.route.session);
}

TEST_CASE("udp echo trailer: a short direct datagram gets a short answer no longer than itself", "[udp_trailer]") {
  // A listener name long enough that the direct trailer outgrows the short form.
  const std::string listener = "a-listener-with-a-long-name";
  const std::size_t need = udp_echo_trailer_size(listener, nullptr);
  const std::string short_form = "\nVLESSBENCH-UDP-SHORT need=" + std::to_string(need);
  REQUIRE(short_form.size() < need);
  for (std::size_t n = 0; n <= need + 2; ++n) {
    const std::string asked(n, 'q');
    const auto a = format_udp_echo(asked, listener, nullptr);
    CAPTURE(n);
    CHECK(a.bytes.size() <= n);
    if (n >= need) {
      CHECK(a.form == udp_echo_form::full);
      CHECK(a.bytes.size() == n);
    } else if (n >= short_form.size()) {
      CHECK(a.form == udp_echo_form::short_form);
      CHECK(a.bytes == std::string(n - short_form.size(), 'q') + short_form);
      const auto r = parse_udp_echo(a.bytes);
      CHECK(r.invalid());
      CHECK(r.value.needed == need);
      CHECK(std::string(r.reason).find("short") != std::string::npos);
    } else {
      CHECK(a.form == udp_echo_form::none);  // too short to say why: nothing sent
      CHECK(a.bytes.empty());
    }
  }
}

TEST_CASE("udp echo trailer: a short datagram relayed by a VLESS session gets the whole trailer", "[udp_trailer]") {
  // Its answer goes back into the authenticated session: no reflection, so no size rule.
  route_info s;
  s.session_id = 42;
  s.user = "alice";
  const std::string trailer = "\nVLESSBENCH-UDP udp vless session=42 user=alice";
  for (std::size_t n = 0; n <= trailer.size() + 2; ++n) {
    const std::string asked(n, 'q');
    const auto a = format_udp_echo(asked, "udp", &s);
    CAPTURE(n);
    CHECK(a.form == udp_echo_form::full);
    const auto r = parse_udp_echo(a.bytes);
    REQUIRE(r.complete());
    CHECK(r.value.route.session == 42);
    if (n < trailer.size()) {
      CHECK(a.bytes == asked + trailer);  // appended: the datagram whole
      CHECK(r.value.payload == asked);
    } else {
      CHECK(a.bytes.size() == n);
    }
  }
  const auto tiny = format_udp_echo("hi\n", "udp", &s);
  CHECK(tiny.bytes == "hi\n" + trailer);
}

TEST_CASE("udp echo trailer: a datagram that looks like one keeps its bytes", "[udp_trailer]") {
  // The last marker is the daemon's: a payload that carries one itself is
  // echoed with it.
  const std::string tricky = "a\nVLESSBENCH-UDP x vless session=1 user=u";
  const auto echo = format_udp_echo(padded(tricky), "udp", nullptr);
  const auto r = parse_udp_echo(echo.bytes);
  REQUIRE(r.complete());
  CHECK(r.value.payload.substr(0, tricky.size()) == tricky);
  CHECK(r.value.route.kind == route_kind::direct);
}

TEST_CASE("udp echo trailer: the echo never exceeds the largest datagram", "[udp_trailer]") {
  route_info s;
  s.session_id = 7;
  s.user = "u";
  const std::string big(max_udp_echo + 10, 'x');
  const auto echo = format_udp_echo(big, "udp", &s);
  CHECK(echo.bytes.size() == max_udp_echo);
  const auto r = parse_udp_echo(echo.bytes);
  REQUIRE(r.complete());
  CHECK(r.value.payload == std::string(max_udp_echo - udp_echo_trailer_size("udp", &s), 'x'));
  CHECK(r.value.route.session == 7);
}

TEST_CASE("udp echo trailer: the room a client leaves fits long names", "[udp_trailer]") {
  route_info s;
  s.session_id = 18'446'744'073'709'551'615ull;
  s.sub = 4'294'967'295u;
  s.user = std::string(40, 'u');
  s.transport = "httpupgrade";
  CHECK(udp_echo_trailer_size(std::string(40, 'l'), &s) <= udp_echo_room);
}

TEST_CASE("udp echo trailer: a short answer whose head holds a full marker reads as short", "[udp_trailer]") {
  // Found by the fuzz target udp_echo: the last marker is the daemon's, whichever form it is.
  // (Direct now: a relayed datagram gets the whole trailer.)
  const std::string listener = "a-listener-with-a-long-name";
  const std::string asked = "\nVLESSBENCH-UDP VL\nVLESSBENCH-UvlessORT need=";
  const auto a = format_udp_echo(asked, listener, nullptr);
  REQUIRE(a.form == udp_echo_form::short_form);
  const auto r = parse_udp_echo(a.bytes);
  CHECK(r.invalid());
  CHECK(r.value.needed == udp_echo_trailer_size(listener, nullptr));
}

TEST_CASE("udp echo trailer: anything else is invalid", "[udp_trailer]") {
  CHECK(parse_udp_echo("").invalid());
  CHECK(parse_udp_echo("plain datagram").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP udp").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP udp sideways").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP  direct").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP-SHORT need=").invalid());
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP-SHORT need=").value.needed == 0);
  CHECK(parse_udp_echo("x\nVLESSBENCH-UDP-SHORT need=12x").value.needed == 0);
}

TEST_CASE("route header: a Mux.Cool sub-connection names its sub, and reads back", "[udp_trailer]") {
  route_info s;
  s.session_id = 42;
  s.sub = 3;
  s.user = "alice";
  s.transport = std::string("ws");  // not = "ws": GCC 12 -O2 reports that as a read of uninitialized bytes
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
  const auto echo = format_udp_echo(padded("ping"), "udp", &s);
  CHECK(echo.bytes.ends_with("ping" + std::string(udp_echo_room - udp_echo_trailer_size("udp", &s), '.') +
                             "\nVLESSBENCH-UDP udp vless session=42 sub=7 user=alice transport=ws"));
  const auto r = parse_udp_echo(echo.bytes);
  REQUIRE(r.complete());
  CHECK(r.value.route.sub == 7u);
  CHECK(r.value.route.session == 42u);
}
