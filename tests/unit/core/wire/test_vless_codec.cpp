#include <catch2/catch.hpp>

#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>

#include "bytes.hpp"
#include "core/wire/vless_codec.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;
using namespace vlessbench::vless;

namespace {

// b831381d-6324-4d53-ad4f-8cda48b30811
const std::string uuid_wire =
    bytes({0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11});
const uuid_bytes test_uuid{0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53,
                           0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11};

// ver · uuid · addons_len=0 · cmd=TCP · port 443 · IPv4 127.0.0.1
const std::string ipv4_header =
    bytes({0x00}) + uuid_wire + bytes({0x00, 0x01, 0x01, 0xbb, 0x01, 0x7f, 0x00, 0x00, 0x01});
// ... cmd=TCP · port 80 · IPv6 ::1
const std::string ipv6_header = bytes({0x00}) + uuid_wire + bytes({0x00, 0x01, 0x00, 0x50, 0x03, 0, 0, 0, 0, 0,   0,
                                                                   0,    0,    0,    0,    0,    0, 0, 0, 0, 0x01});
// ... cmd=UDP · port 8080 · domain "example.com"
const std::string domain_header =
    bytes({0x00}) + uuid_wire + bytes({0x00, 0x02, 0x1f, 0x90, 0x02, 0x0b}) + "example.com";
// addons = field 1 (tag 0x0a), length 16, "xtls-rprx-vision"; then TCP 443 IPv4 10.0.0.2
const std::string flow_header = bytes({0x00}) + uuid_wire + bytes({0x12, 0x0a, 0x10}) + "xtls-rprx-vision" +
                                bytes({0x01, 0x01, 0xbb, 0x01, 0x0a, 0x00, 0x00, 0x02});
// ... addons_len=0 · cmd=Mux, nothing after the command
const std::string mux_header = bytes({0x00}) + uuid_wire + bytes({0x00, 0x03});

// A TCP/IPv4 header around the given raw addons bytes.
std::string with_addons(const std::string& addons) {
  return bytes({0x00}) + uuid_wire + bytes({static_cast<int>(addons.size())}) + addons +
         bytes({0x01, 0x01, 0xbb, 0x01, 0x7f, 0x00, 0x00, 0x01});
}

void require_every_prefix_needs_more(const std::string& header) {
  for (std::size_t n = 0; n < header.size(); ++n) {
    INFO("prefix length " << n);
    const auto r = parse_request(std::string_view(header).substr(0, n));
    REQUIRE(r.need_more());
    REQUIRE(r.consumed == 0);
  }
}

}  // namespace

TEST_CASE("parse_request decodes a hand-built IPv4 header", "[vless]") {
  REQUIRE(ipv4_header.size() == 26);
  const auto r = parse_request(ipv4_header);
  REQUIRE(r.complete());
  CHECK(r.consumed == 26);
  CHECK(r.value.uuid == test_uuid);
  CHECK(r.value.flow.empty());
  CHECK(r.value.command == 1);
  CHECK(r.value.dest.port == 443);
  CHECK(r.value.dest.type == address_type::ipv4);
  CHECK(r.value.dest.address == std::string("\x7f\0\0\x01", 4));
  CHECK(format_destination(r.value.dest) == "127.0.0.1:443");
}

TEST_CASE("parse_request decodes a hand-built IPv6 header", "[vless]") {
  REQUIRE(ipv6_header.size() == 38);
  const auto r = parse_request(ipv6_header);
  REQUIRE(r.complete());
  CHECK(r.consumed == 38);
  CHECK(r.value.dest.port == 80);
  CHECK(r.value.dest.type == address_type::ipv6);
  CHECK(r.value.dest.address == std::string(15, '\0') + "\x01");
  CHECK(format_destination(r.value.dest) == "[::1]:80");
}

TEST_CASE("parse_request decodes a hand-built domain header", "[vless]") {
  REQUIRE(domain_header.size() == 34);
  const auto r = parse_request(domain_header);
  REQUIRE(r.complete());
  CHECK(r.consumed == 34);
  CHECK(r.value.command == 2);
  CHECK(r.value.dest.port == 8080);
  CHECK(r.value.dest.type == address_type::domain);
  CHECK(r.value.dest.address == "example.com");
  CHECK(format_destination(r.value.dest) == "example.com:8080");
  CHECK(r.value.dest.net == network::udp);  // command 2
}

TEST_CASE("parse_request reads the flow addon", "[vless]") {
  const auto r = parse_request(flow_header);
  REQUIRE(r.complete());
  CHECK(r.consumed == flow_header.size());
  CHECK(r.value.flow == "xtls-rprx-vision");
  CHECK(r.value.dest.port == 443);
  CHECK(format_destination(r.value.dest) == "10.0.0.2:443");
}

TEST_CASE("parse_request ends a Mux header right after the command", "[vless]") {
  // Xray-core's DecodeRequestHeader reads no port/address for RequestCommandMux.
  REQUIRE(mux_header.size() == 19);
  const auto r = parse_request(mux_header + "\x01\x02\x03");
  REQUIRE(r.complete());
  CHECK(r.consumed == 19);
  CHECK(r.value.command == 3);
  CHECK(r.value.dest.port == 0);
  CHECK(r.value.dest.type == address_type::domain);
  CHECK(r.value.dest.address == "v1.mux.cool");
}

TEST_CASE("parse_request keeps an unknown command byte and parses the address", "[vless]") {
  std::string h = ipv4_header;
  h[18] = 0x07;
  const auto r = parse_request(h);
  REQUIRE(r.complete());
  CHECK(r.value.command == 7);
  CHECK(r.consumed == 26);
}

TEST_CASE("parse_request needs more at every split point of valid headers", "[vless]") {
  for (const auto* h : {&ipv4_header, &ipv6_header, &domain_header, &flow_header, &mux_header}) {
    require_every_prefix_needs_more(*h);
    REQUIRE(parse_request(*h).complete());
  }
}

TEST_CASE("parse_request leaves the payload unconsumed", "[vless]") {
  const std::string payload = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const auto* h : {&ipv4_header, &ipv6_header, &domain_header, &flow_header, &mux_header}) {
    const auto r = parse_request(*h + payload);
    REQUIRE(r.complete());
    CHECK(r.consumed == h->size());
    CHECK(std::string((*h + payload).substr(r.consumed)) == payload);
  }
}

TEST_CASE("parse_request rejects a bad version from the first byte", "[vless]") {
  for (int v : {1, 2, 0xff}) {
    const auto r = parse_request(bytes({v}));
    REQUIRE(r.invalid());
    CHECK(r.reason == "bad_version");
  }
  std::string h = ipv4_header;
  h[0] = 0x01;
  CHECK(parse_request(h).reason == "bad_version");
  CHECK(parse_request("").need_more());
}

TEST_CASE("parse_request rejects unknown address types", "[vless]") {
  for (int atyp : {0, 4, 0xff}) {
    // Up to and including the atyp byte; the verdict does not wait for the address.
    std::string h = ipv4_header.substr(0, 22);
    h[21] = static_cast<char>(atyp);
    const auto r = parse_request(h);
    REQUIRE(r.invalid());
    CHECK(r.reason == "bad_address_type");
  }
}

TEST_CASE("parse_request rejects empty and malformed domains", "[vless]") {
  const std::string prefix = bytes({0x00}) + uuid_wire + bytes({0x00, 0x01, 0x00, 0x50, 0x02});
  SECTION("zero length") {
    const auto r = parse_request(prefix + bytes({0x00}) + "payload");
    REQUIRE(r.invalid());
    CHECK(r.reason == "empty_domain");
  }
  SECTION("control, space, NUL and DEL bytes") {
    for (const std::string& name : {std::string("a b.com"), std::string("a\0b", 3), std::string("x\r\n"),
                                    std::string("a\x7f"), std::string("\x1f")}) {
      const auto r = parse_request(prefix + bytes({static_cast<int>(name.size())}) + name);
      REQUIRE(r.invalid());
      CHECK(r.reason == "bad_domain");
    }
  }
  SECTION("a bad byte is caught before the rest of the name arrives") {
    const auto r = parse_request(prefix + bytes({0x10}) + "ab ");
    REQUIRE(r.invalid());
    CHECK(r.reason == "bad_domain");
    CHECK(parse_request(prefix + bytes({0x10}) + "abc").need_more());
  }
  SECTION("non-ASCII bytes are left to the resolver") {
    const auto r = parse_request(prefix + bytes({0x03, 0xc3, 0xa9, 0x65}));
    REQUIRE(r.complete());
    CHECK(r.value.dest.address == "\xc3\xa9\x65");
  }
}

TEST_CASE("parse_request skips unknown addon fields by wire type", "[vless]") {
  // field 3 varint 150 · field 4 fixed64 · field 5 fixed32 · field 2 seed "abc" ·
  // field 15 length-delimited · flow "v" · field 1 as varint (wrong wire type: skipped)
  const std::string addons =
      bytes({0x18, 0x96, 0x01, 0x21, 1,   2,   3,    4,    5,    6,    7,    8,    0x2d, 1,    2,   3,
             4,    0x12, 0x03, 'a',  'b', 'c', 0x7a, 0x02, 0xff, 0xfe, 0x0a, 0x01, 'v',  0x08, 0x05});
  const std::string h = with_addons(addons);
  const auto r = parse_request(h);
  REQUIRE(r.complete());
  CHECK(r.consumed == h.size());
  CHECK(r.value.flow == "v");
  CHECK(r.value.dest.port == 443);
  require_every_prefix_needs_more(h);
}

TEST_CASE("parse_request takes the last flow when it is repeated", "[vless]") {
  const auto r = parse_request(with_addons(bytes({0x0a, 0x01, 'a', 0x0a, 0x02, 'b', 'c'})));
  REQUIRE(r.complete());
  CHECK(r.value.flow == "bc");
}

TEST_CASE("parse_request accepts the longest legal varint", "[vless]") {
  // field 3, value 2^64-1: nine 0xff then 0x01
  const auto r = parse_request(with_addons(bytes({0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})));
  CHECK(r.complete());
}

TEST_CASE("parse_request rejects malformed addons", "[vless]") {
  const std::initializer_list<std::initializer_list<int>> bad = {
      {0x18, 0x96},                                                              // varint cut short
      {0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},        // varint overflows 64 bits
      {0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x01},  // 11-byte varint
      {0x0a, 0x05, 'a'},                                                         // length overruns addons
      {0x0a, 0x80},                                                              // length varint cut short
      {0x0a},                                                                    // tag with no length
      {0x21, 1, 2, 3},                                                           // fixed64 cut short
      {0x2d, 1, 2},                                                              // fixed32 cut short
      {0x02, 0x00},                                                              // field number 0
      {0x0b},                                                                    // start group
      {0x0c},                                                                    // end group
      {0x0e},                                                                    // wire type 6
      {0x0f},                                                                    // wire type 7
      {0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00},                                      // field number > 2^29-1
      {0x0a, 0x01, 0xff},                                                        // flow not UTF-8
      {0x0a, 0x03, 0xed, 0xa0, 0x80},                                            // flow: UTF-8 surrogate
      {0x0a, 0x02, 0xc0, 0x80},                                                  // flow: overlong NUL
  };
  for (const auto& a : bad) {
    std::string addons;
    for (int b : a) addons.push_back(static_cast<char>(b));
    INFO("addons size " << addons.size() << " first byte " << int(static_cast<unsigned char>(addons[0])));
    const auto r = parse_request(with_addons(addons));
    REQUIRE(r.invalid());
    CHECK(r.reason == "bad_addons");
  }
}

TEST_CASE("encode_request produces the hand-built bytes", "[vless]") {
  request_header v4;
  v4.uuid = test_uuid;
  v4.command = 1;
  v4.dest = destination_for_host("127.0.0.1", 443);
  CHECK(encode_request(v4) == ipv4_header);

  request_header v6 = v4;
  v6.dest = destination_for_host("::1", 80);
  CHECK(encode_request(v6) == ipv6_header);

  request_header d = v4;
  d.command = 2;
  d.dest = destination_for_host("example.com", 8080);
  CHECK(encode_request(d) == domain_header);

  request_header f = v4;
  f.flow = "xtls-rprx-vision";
  f.dest = destination_for_host("10.0.0.2", 443);
  CHECK(encode_request(f) == flow_header);

  request_header m = v4;
  m.command = 3;
  CHECK(encode_request(m) == mux_header);
}

TEST_CASE("encode_request round-trips through parse_request", "[vless]") {
  for (const auto* h : {&ipv4_header, &ipv6_header, &domain_header, &flow_header, &mux_header}) {
    const auto first = parse_request(*h);
    REQUIRE(first.complete());
    const auto again = parse_request(encode_request(first.value));
    REQUIRE(again.complete());
    CHECK(again.value == first.value);
  }
  SECTION("the longest flow that fits the addons length byte") {
    request_header h;
    h.uuid = test_uuid;
    h.command = 1;
    h.dest = destination_for_host(std::string(255, 'a'), 1);
    h.flow = std::string(252, 'f');  // tag 1 + length varint 2 + 252 = 255
    const auto wire = encode_request(h);
    CHECK(static_cast<unsigned char>(wire[17]) == 255);
    const auto r = parse_request(wire);
    REQUIRE(r.complete());
    CHECK(r.consumed == wire.size());
    CHECK(r.value == h);
  }
}

TEST_CASE("encode_request refuses headers the parser would reject", "[vless]") {
  request_header h;
  h.command = 1;
  h.dest.type = address_type::domain;
  h.dest.address = "";
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
  h.dest.address = std::string(256, 'a');
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
  h.dest.address = "bad host";
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
  h.dest.address = "ok";
  h.flow = std::string(253, 'f');
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
  h.flow = "\xff";
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
  h.flow = "";
  h.dest.type = static_cast<address_type>(9);
  CHECK_THROWS_AS(encode_request(h), std::invalid_argument);
}

TEST_CASE("parse_response", "[vless]") {
  SECTION("no addons") {
    const std::string wire(response_header.begin(), response_header.end());
    const auto r = parse_response(wire + "HTTP/1.1 200 OK");
    REQUIRE(r.complete());
    CHECK(r.consumed == 2);
    CHECK(r.value == 0);
  }
  SECTION("with addons") {
    const auto r = parse_response(bytes({0x00, 0x02, 0x0a, 0x00, 'x'}));
    REQUIRE(r.complete());
    CHECK(r.consumed == 4);
    CHECK(r.value == 2);
  }
  SECTION("incomplete") {
    CHECK(parse_response("").need_more());
    CHECK(parse_response(bytes({0x00})).need_more());
    CHECK(parse_response(bytes({0x00, 0x03, 0x01, 0x02})).need_more());
  }
  SECTION("bad version") {
    const auto r = parse_response(bytes({0x01}));
    REQUIRE(r.invalid());
    CHECK(r.reason == "bad_version");
    CHECK(r.consumed == 0);
  }
}

TEST_CASE("uuid text helpers", "[vless]") {
  SECTION("parse any case, format lower case") {
    const auto a = parse_uuid("b831381d-6324-4d53-ad4f-8cda48b30811");
    REQUIRE(a);
    CHECK(*a == test_uuid);
    const auto b = parse_uuid("B831381D-6324-4D53-AD4F-8cdA48B30811");
    REQUIRE(b);
    CHECK(*b == test_uuid);
    CHECK(format_uuid(*b) == "b831381d-6324-4d53-ad4f-8cda48b30811");
  }
  SECTION("strict 8-4-4-4-12") {
    CHECK_FALSE(parse_uuid("b831381d63244d53ad4f8cda48b30811"));       // no dashes
    CHECK_FALSE(parse_uuid("b831381d-6324-4d53-ad4f-8cda48b3081"));    // 35 chars
    CHECK_FALSE(parse_uuid("b831381d-6324-4d53-ad4f-8cda48b308111"));  // 37 chars
    CHECK_FALSE(parse_uuid("b831381-d6324-4d53-ad4f-8cda48b30811"));   // dash misplaced
    CHECK_FALSE(parse_uuid("g831381d-6324-4d53-ad4f-8cda48b30811"));   // not hex
    CHECK_FALSE(parse_uuid("b831381d-6324-4d53-ad4f 8cda48b30811"));   // space for dash
    CHECK_FALSE(parse_uuid("{b831381d-6324-4d53-ad4f-8cda48b3081}"));  // braces
    CHECK_FALSE(parse_uuid(""));
  }
  SECTION("constant-time compare still compares") {
    auto other = test_uuid;
    CHECK(uuid_equal(test_uuid, other));
    other[0] ^= 0x01;
    CHECK_FALSE(uuid_equal(test_uuid, other));
    other = test_uuid;
    other[15] ^= 0x80;
    CHECK_FALSE(uuid_equal(test_uuid, other));
  }
}

TEST_CASE("random_uuid is RFC 4122 version 4", "[vless]") {
  std::set<uuid_bytes> seen;
  for (int i = 0; i < 64; ++i) {
    const auto u = random_uuid();
    CHECK((u[6] & 0xf0) == 0x40);
    CHECK((u[8] & 0xc0) == 0x80);
    const auto text = format_uuid(u);
    CHECK(text[14] == '4');
    CHECK(parse_uuid(text) == u);
    seen.insert(u);
  }
  CHECK(seen.size() == 64);
}
