#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/wire/ntp_message.hpp"
#include "core/wire/stun_message.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;

namespace {
// RFC 5769 §2.1: a Binding request with SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME,
// MESSAGE-INTEGRITY and FINGERPRINT.
const std::string rfc5769_request =
    bytes({0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01,
           0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x10}) +
    "STUN test client" + bytes({0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x01, 0xff, 0x80, 0x29, 0x00, 0x08,
                                0x93, 0x2f, 0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36, 0x00, 0x06, 0x00, 0x09}) +
    "evtj:h6vY   " +
    bytes({0x00, 0x08, 0x00, 0x14, 0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e, 0xf2, 0xb5,
           0xb2, 0xd3, 0xf2, 0x49, 0xc1, 0xb5, 0x71, 0xa2, 0x80, 0x28, 0x00, 0x04, 0xe5, 0x7a, 0x3b, 0xcf});
// The 20-byte Binding request a delay test sends (transaction id 1..12, no attributes).
const std::string plain_binding = bytes({0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42, 0x01, 0x02,
                                         0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c});
// v2rayN's NTP query: LI 0, version 3, mode 3, the rest zero.
const std::string v3_query = bytes({0x1b}) + std::string(47, '\0');
}  // namespace

TEST_CASE("ntp: a v3 or v4 client request is answered in server mode with the origin echoed", "[ntp]") {
  auto r = ntp::parse_request(v3_query);
  REQUIRE(r.complete());
  CHECK(r.value.version == 3);
  CHECK(r.value.mode == ntp::mode_client);
  const std::uint64_t t = ntp::from_unix_ns(1'700'000'000'123'456'789ULL);
  const std::string q4 = ntp::format_request(t);
  CHECK(q4.size() == 48);
  r = ntp::parse_request(q4);
  REQUIRE(r.complete());
  CHECK(r.value.version == 4);
  CHECK(r.value.transmit == t);
  const std::string a = ntp::format_response(r.value, t + 10, t + 20);
  CHECK(a.size() == ntp::header_bytes);
  const auto back = ntp::parse_packet(a);
  REQUIRE(back.complete());
  CHECK(back.value.mode == ntp::mode_server);
  CHECK(back.value.version == 4);
  CHECK(back.value.stratum == 10);
  CHECK(back.value.reference_id == 0x4C4F434CU);
  CHECK(back.value.origin == t);
  CHECK(back.value.receive == t + 10);
  CHECK(back.value.transmit == t + 20);
  // The timestamp conversion round-trips to the nanosecond's neighbourhood.
  const auto ns = ntp::to_unix_ns(t);
  CHECK(ns <= 1'700'000'000'123'456'789ULL);
  CHECK(ns + 2 >= 1'700'000'000'123'456'789ULL);
  CHECK(ntp::to_unix_ns(0) == 0);
}

TEST_CASE("ntp: hostile or foreign packets are refused with a reason", "[ntp]") {
  auto reason = [](const std::string& m) { return std::string(ntp::parse_request(m).reason); };
  CHECK(reason(std::string(47, '\x1b')).find("shorter") != std::string::npos);
  CHECK(reason(v3_query + std::string(1024, '\0')).find("longer") != std::string::npos);
  CHECK(reason(bytes({0x0b}) + std::string(47, '\0')).find("version") != std::string::npos);  // v1
  CHECK(reason(bytes({0x2b}) + std::string(47, '\0')).find("version") != std::string::npos);  // v5
  CHECK(reason(bytes({0x1c}) + std::string(47, '\0')).find("server") != std::string::npos);   // mode 4
  CHECK(reason(bytes({0x1d}) + std::string(47, '\0')).find("broadcast") != std::string::npos);
  CHECK(reason(bytes({0x1e}) + std::string(47, '\0')).find("mode") != std::string::npos);  // control
  CHECK(ntp::parse_packet(bytes({0x03}) + std::string(47, '\0')).invalid());               // version 0
  // A request with extension room is fine: the answer (48) is shorter.
  CHECK(ntp::parse_request(v3_query + std::string(20, '\0')).complete());
}

TEST_CASE("stun: CRC-32 and the RFC 5769 request's FINGERPRINT", "[stun]") {
  CHECK(stun::crc32("123456789") == 0xCBF43926U);
  const auto r = stun::parse_request(rfc5769_request);
  REQUIRE(r.complete());
  CHECK(r.value.fingerprint);
  CHECK(r.value.id[0] == 0xb7);
  CHECK(r.value.id[11] == 0xae);
  std::string broken = rfc5769_request;
  broken[30] ^= 1;  // in SOFTWARE
  CHECK(std::string(stun::parse_request(broken).reason).find("FINGERPRINT") != std::string::npos);
}

TEST_CASE("stun: the answer's XOR-MAPPED-ADDRESS is RFC 5769's and SOFTWARE names the route", "[stun]") {
  const auto r = stun::parse_request(rfc5769_request);
  REQUIRE(r.complete());
  stun::mapped_address m;
  m.bytes[0] = 192;
  m.bytes[2] = 2;
  m.bytes[3] = 1;
  m.port = 32853;
  const std::string a = stun::format_response(r.value, m, "stun vless session=7 user=alice", 0);
  // RFC 5769 §2.2: 192.0.2.1:32853 XORed.
  CHECK(a.substr(20, 12) == bytes({0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43}));
  CHECK(a.substr(0, 2) == bytes({0x01, 0x01}));
  const auto back = stun::parse_response(a);
  REQUIRE(back.complete());
  CHECK(back.value.id == r.value.id);
  CHECK(back.value.mapped.port == 32853);
  CHECK(back.value.mapped.bytes == m.bytes);
  CHECK(back.value.software == "stun vless session=7 user=alice");
  // With FINGERPRINT, as the request had: the last 8 bytes, and the CRC covers the rest.
  CHECK(a.substr(a.size() - 8, 4) == bytes({0x80, 0x28, 0x00, 0x04}));
  CHECK(stun::parse_request(a).invalid());  // an answer is never answered

  // IPv6: the address XORed with the cookie and the transaction id.
  stun::mapped_address v6;
  v6.v6 = true;
  v6.port = 443;
  for (int i = 0; i < 16; ++i) v6.bytes[i] = static_cast<std::uint8_t>(0x20 + i);
  const auto b6 = stun::parse_response(stun::format_response(r.value, v6, "x", 0));
  REQUIRE(b6.complete());
  CHECK(b6.value.mapped.v6);
  CHECK(b6.value.mapped.bytes == v6.bytes);
}

TEST_CASE("stun: an answer to a direct source is never longer than its request", "[stun]") {
  const auto r = stun::parse_request(plain_binding);
  REQUIRE(r.complete());
  stun::mapped_address m;
  m.bytes[0] = 10;
  m.port = 5000;
  // 20 bytes asked: not even XOR-MAPPED-ADDRESS fits (32): no answer.
  CHECK(stun::format_response(r.value, m, "stun direct", plain_binding.size()).empty());
  // Padded to 32: the address, no SOFTWARE.
  const std::string q32 = stun::format_request(r.value.id, 32);
  CHECK(q32.size() == 32);
  const auto r32 = stun::parse_request(q32);
  REQUIRE(r32.complete());
  const std::string a32 = stun::format_response(r32.value, m, "stun direct", q32.size());
  CHECK(a32.size() == 32);
  CHECK(stun::parse_response(a32).value.software.empty());
  // Padded to 96: SOFTWARE too.
  const std::string q96 = stun::format_request(r.value.id, 96);
  CHECK(q96.size() == 96);
  const std::string a96 = stun::format_response(stun::parse_request(q96).value, m, "stun direct", q96.size());
  CHECK(a96.size() <= 96);
  CHECK(stun::parse_response(a96).value.software == "stun direct");
}

TEST_CASE("stun: hostile or foreign messages are refused with a reason", "[stun]") {
  auto reason = [](const std::string& m) { return std::string(stun::parse_request(m).reason); };
  CHECK(reason(plain_binding.substr(0, 19)).find("shorter") != std::string::npos);
  CHECK(reason(bytes({0x00, 0x01, 0x00, 0x00}) + std::string(16, '\0')).find("cookie") != std::string::npos);
  CHECK(reason(bytes({0xc0}) + plain_binding.substr(1)).find("top bits") != std::string::npos);
  std::string wrong_len = plain_binding;
  wrong_len[3] = 4;
  CHECK(reason(wrong_len).find("length") != std::string::npos);
  std::string success = plain_binding;
  success[0] = 0x01;
  success[1] = 0x01;
  CHECK(reason(success).find("response") != std::string::npos);
  std::string indication = plain_binding;
  indication[1] = 0x11;
  CHECK(reason(indication).find("indication") != std::string::npos);
  std::string allocate = plain_binding;
  allocate[1] = 0x03;  // TURN Allocate
  CHECK(reason(allocate).find("Binding") != std::string::npos);
  auto with_attr = [](std::initializer_list<int> attr) {
    std::string m = plain_binding + bytes(attr);
    m[3] = static_cast<char>(m.size() - 20);
    return m;
  };
  CHECK(reason(with_attr({0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06})).find("CHANGE-REQUEST") !=
        std::string::npos);
  CHECK(stun::parse_request(with_attr({0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00})).complete());
  CHECK(reason(with_attr({0x00, 0x27, 0x00, 0x04, 0x13, 0x88, 0x00, 0x00})).find("RESPONSE-PORT") != std::string::npos);
  CHECK(reason(with_attr({0x00, 0x77, 0x00, 0x00})).find("unknown") != std::string::npos);
  CHECK(stun::parse_request(with_attr({0x80, 0x77, 0x00, 0x00})).complete());  // optional: ignored
  CHECK(reason(with_attr({0x00, 0x26, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00})).find("past the end") != std::string::npos);
  CHECK(reason(plain_binding + std::string(1024, '\0')).find("longer") != std::string::npos);
}
