#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "bytes.hpp"
#include "core/wire/socks5_udp.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;

TEST_CASE("socks5 udp: an IPv4 destination's header and its payload", "[socks5]") {
  const std::string d = socks5::encode_udp_datagram("127.0.0.1", 0x1234, "ping");
  CHECK(d == bytes({0, 0, 0, 1, 127, 0, 0, 1, 0x12, 0x34}) + "ping");
  const auto r = socks5::parse_udp_datagram(d);
  REQUIRE(r.complete());
  CHECK(r.consumed == 10);
  CHECK(r.value.host == "127.0.0.1");
  CHECK(r.value.port == 0x1234);
  CHECK(r.value.data == "ping");
}

TEST_CASE("socks5 udp: IPv6 and domain destinations round-trip", "[socks5]") {
  const std::string six = socks5::encode_udp_datagram("::1", 53, "");
  CHECK(six.size() == 4 + 16 + 2);
  CHECK(static_cast<unsigned char>(six[3]) == 4);
  const auto r6 = socks5::parse_udp_datagram(six);
  REQUIRE(r6.complete());
  CHECK(r6.value.host == "::1");
  CHECK(r6.value.port == 53);
  CHECK(r6.value.data.empty());

  const std::string named = socks5::encode_udp_datagram("dns.vlessbench.test", 5353, "q");
  CHECK(named.substr(0, 5) == bytes({0, 0, 0, 3, 19}));
  const auto rn = socks5::parse_udp_datagram(named);
  REQUIRE(rn.complete());
  CHECK(rn.value.host == "dns.vlessbench.test");
  CHECK(rn.value.port == 5353);
  CHECK(rn.value.data == "q");
  CHECK_THROWS_AS(socks5::encode_udp_datagram(std::string(256, 'a'), 1, ""), std::invalid_argument);
}

TEST_CASE("socks5 udp: malformed headers are refused with a reason", "[socks5]") {
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0})).reason == "short_header");
  CHECK(socks5::parse_udp_datagram(bytes({0, 1, 0, 1, 127, 0, 0, 1, 0, 1})).reason == "bad_reserved");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 1, 1, 127, 0, 0, 1, 0, 1})).reason == "fragmented");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0, 2, 127, 0, 0, 1, 0, 1})).reason == "bad_address_type");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0, 3, 0, 0, 1})).reason == "empty_domain");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0, 1, 127, 0, 0, 1, 0})).reason == "short_header");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0, 3, 5, 'a', 'b'})).reason == "short_header");
  CHECK(socks5::parse_udp_datagram(bytes({0, 0, 0, 4, 0, 0})).reason == "short_header");
}
