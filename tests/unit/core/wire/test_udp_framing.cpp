#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "bytes.hpp"
#include "core/wire/udp_framing.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;

TEST_CASE("udp framing: a packet is a big-endian length and the datagram", "[udp_framing]") {
  const std::string wire = bytes({0x00, 0x05}) + "hello" + bytes({0x00, 0x00}) + bytes({0x01, 0x00});
  auto r = vless::parse_udp_packet(wire);
  REQUIRE(r.complete());
  CHECK(r.value == "hello");
  CHECK(r.consumed == 7);
  // An empty datagram is a datagram.
  r = vless::parse_udp_packet(std::string_view(wire).substr(7));
  REQUIRE(r.complete());
  CHECK(r.value.empty());
  CHECK(r.consumed == 2);
  // 256 announced, none there yet.
  r = vless::parse_udp_packet(std::string_view(wire).substr(9));
  CHECK(r.need_more());
  CHECK(r.consumed == 0);
}

TEST_CASE("udp framing: need_more until the whole datagram is there", "[udp_framing]") {
  std::string wire;
  vless::encode_udp_packet(wire, "datagram");
  for (std::size_t n = 0; n < wire.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(vless::parse_udp_packet(std::string_view(wire).substr(0, n)).need_more());
  }
  CHECK(vless::parse_udp_packet(wire).complete());
}

TEST_CASE("udp framing: a length over the cap is invalid at once", "[udp_framing]") {
  auto r = vless::parse_udp_packet(bytes({0xff, 0xff}));
  REQUIRE(r.invalid());
  CHECK(r.reason == "udp_packet_too_large");
  // The largest IPv4 datagram is accepted (announced; its bytes have not come
  // yet).
  CHECK(vless::parse_udp_packet(bytes({0xff, 0xe3})).need_more());
  CHECK(vless::parse_udp_packet(bytes({0xff, 0xe4})).invalid());
  // A caller's own cap.
  CHECK(vless::parse_udp_packet(bytes({0x00, 0x11}), 16).invalid());
  CHECK(vless::parse_udp_packet(bytes({0x00, 0x10}), 16).need_more());
}

TEST_CASE("udp framing: encode round trip and its limit", "[udp_framing]") {
  std::string wire;
  const std::string big(vless::max_udp_datagram, 'x');
  vless::encode_udp_packet(wire, "a");
  vless::encode_udp_packet(wire, big);
  CHECK(wire.substr(0, 3) == bytes({0x00, 0x01}) + "a");
  auto r = vless::parse_udp_packet(std::string_view(wire).substr(3));
  REQUIRE(r.complete());
  CHECK(r.value == big);
  std::string out;
  CHECK_THROWS_AS(vless::encode_udp_packet(out, std::string(vless::max_udp_datagram + 1, 'x')), std::length_error);
  CHECK(out.empty());
}
