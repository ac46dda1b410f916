// REALITY's pure wire pieces (core/wire/reality.hpp): the ClientHello record, key and short id text,
// group names.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/wire/reality.hpp"

using namespace vlessbench;

TEST_CASE("reality: a ClientHello record is complete, short or refused") {
  std::vector<std::uint8_t> rec{0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0x00, 0x00, 0x04, 1, 2, 3, 4};
  const auto whole = reality::client_hello_record(rec);
  REQUIRE(whole.complete());
  CHECK(whole.consumed == rec.size());
  CHECK(whole.value.size() == 8);
  CHECK(reality::client_hello_record(std::span(rec).first(7)).need_more());
  CHECK(reality::client_hello_record(std::span(rec).first(0)).need_more());
  auto other = rec;
  other[0] = 0x17;
  CHECK(reality::client_hello_record(other).invalid());
  auto spanning = rec;
  spanning[8] = 0x10;  // a ClientHello longer than its record
  CHECK(reality::client_hello_record(spanning).invalid());
  std::vector<std::uint8_t> huge{0x16, 0x03, 0x01, 0x40, 0x01};  // 16385 bytes: over TLS's limit
  CHECK(reality::client_hello_record(huge).invalid());
}

TEST_CASE("reality: keys and short ids as text") {
  reality::key32 k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::uint8_t>(i * 9 + 1);
  const auto text = reality::encode_key(k);
  CHECK(text.size() == 43);
  CHECK(reality::decode_key(text) == k);
  CHECK(reality::decode_key(text + "=") == k);
  CHECK_FALSE(reality::decode_key(text.substr(1)));
  CHECK_FALSE(reality::decode_key(text.substr(0, 42) + "!"));
  CHECK(reality::parse_short_id("") == reality::short_id{});
  CHECK(reality::parse_short_id("0123abcd") == reality::short_id{0x01, 0x23, 0xab, 0xcd, 0, 0, 0, 0});
  CHECK_FALSE(reality::parse_short_id("123"));
  CHECK_FALSE(reality::parse_short_id("0123456789abcdef00"));
  CHECK_FALSE(reality::parse_short_id("zz"));
}

TEST_CASE("reality: group names") {
  const std::vector<std::uint16_t> g{0x11ec, 0x001d, 0x0a0a, 0x1234};
  CHECK(reality::group_names_json(g) == R"(["X25519MLKEM768","X25519","GREASE","0x1234"])");
}
