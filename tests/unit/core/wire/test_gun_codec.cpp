// The gun framing against byte vectors written out by hand from the public
// specs: gRPC's length-prefixed message (PROTOCOL-HTTP2.md: flag byte, 4-byte
// big-endian length) and protobuf's encoding (tag = field << 3 | wire type,
// base-128 varints: 300 = ac 02, 150 = 96 01).
#include <catch2/catch.hpp>
#include <string>

#include "bytes.hpp"
#include "core/wire/gun_codec.hpp"

using namespace vlessbench;
using namespace vlessbench::gun;
using vlessbench::test::bytes;

namespace {

// Streams text through a decoder in pieces of `chunk` bytes; the data, or
// "!reason".
std::string stream_all(const std::string& text, std::size_t chunk, message_kind kind = message_kind::hunk,
                       std::size_t max = default_max_message) {
  stream_decoder d(kind, max);
  std::string out;
  for (std::size_t at = 0; at < text.size(); at += chunk) {
    const auto step = d.decode(std::string_view(text).substr(at, chunk), out);
    if (!step.reason.empty()) return "!" + std::string(step.reason);
    REQUIRE(step.consumed == std::min(chunk, text.size() - at));
  }
  return out;
}

// The same through every piece size from 1 byte to the whole.
std::string stream_every_split(const std::string& text, message_kind kind = message_kind::hunk) {
  const std::string whole = stream_all(text, text.size() + 1, kind);
  for (std::size_t chunk = 1; chunk <= text.size(); ++chunk) REQUIRE(stream_all(text, chunk, kind) == whole);
  return whole;
}

std::string parse_reason(const std::string& text, message_kind kind = message_kind::hunk) {
  const auto r = parse_message(text, kind);
  REQUIRE(r.invalid());
  return std::string(r.reason);
}

}  // namespace

TEST_CASE("gun: Hunk{\"abc\"} is 00 00000005 0a 03 61 62 63", "[gun]") {
  const std::string wire = bytes({0x00, 0x00, 0x00, 0x00, 0x05, 0x0a, 0x03, 0x61, 0x62, 0x63});
  CHECK(encode_hunk("abc") == wire);
  const auto r = parse_message(wire, message_kind::hunk);
  REQUIRE(r.complete());
  CHECK(r.consumed == wire.size());
  REQUIRE(r.value.chunks.size() == 1);
  CHECK(r.value.chunks[0] == "abc");
  CHECK(stream_every_split(wire) == "abc");
}

TEST_CASE("gun: a 300-byte hunk has the two-byte varint ac 02 and length 0x12f", "[gun]") {
  const std::string data(300, 'x');
  const std::string wire = bytes({0x00, 0x00, 0x00, 0x01, 0x2f, 0x0a, 0xac, 0x02}) + data;
  CHECK(encode_hunk(data) == wire);
  char head[max_header_bytes];
  CHECK(encode_hunk_header(head, data.size()) == 8);
  CHECK(std::string(head, 8) == wire.substr(0, 8));
  CHECK(stream_all(wire, 7) == data);
  CHECK(parse_message(wire, message_kind::hunk).value.chunks.at(0) == data);
}

TEST_CASE("gun: an empty hunk is an empty message (proto3 omits the empty field)", "[gun]") {
  const std::string wire = bytes({0x00, 0x00, 0x00, 0x00, 0x00});
  CHECK(encode_hunk("") == wire);
  const auto r = parse_message(wire, message_kind::hunk);
  REQUIRE(r.complete());
  CHECK(r.consumed == 5);
  CHECK(r.value.chunks.empty());
  stream_decoder d(message_kind::hunk);
  std::string out;
  CHECK(d.decode(wire, out).reason.empty());
  CHECK(out.empty());
  CHECK(d.messages() == 1);
  CHECK(d.at_boundary());
}

TEST_CASE("gun: MultiHunk{[\"ab\", \"\", \"c\"]} repeats field 1", "[gun]") {
  const std::string wire = bytes({0x00, 0x00, 0x00, 0x00, 0x09, 0x0a, 0x02, 0x61, 0x62, 0x0a, 0x00, 0x0a, 0x01, 0x63});
  CHECK(encode_multi_hunk({"ab", "", "c"}) == wire);
  const auto r = parse_message(wire, message_kind::multi_hunk);
  REQUIRE(r.complete());
  REQUIRE(r.value.chunks.size() == 3);
  CHECK(r.value.chunks[0] == "ab");
  CHECK(r.value.chunks[1].empty());
  CHECK(r.value.chunks[2] == "c");
  CHECK(stream_every_split(wire, message_kind::multi_hunk) == "abc");
  // In a Tun message a second data field is refused (a streaming decoder cannot
  // let the last win).
  CHECK(parse_reason(wire) == "hunk_data_repeated");
  CHECK(stream_all(wire, 1) == "!hunk_data_repeated");
}

TEST_CASE("gun: unknown fields of every skippable wire type are skipped", "[gun]") {
  // field 2 varint 150 (10 96 01), field 3 I64 (19 + 8 bytes), field 4 I32 (25
  // + 4 bytes), field 5 LEN "zz" (2a 02 7a 7a), then data "hi" (0a 02 68 69): 3
  // + 9 + 5 + 4 + 4 = 25 bytes.
  const std::string body = bytes({0x10, 0x96, 0x01, 0x19, 1,    2,    3,    4,    5,    6,    7,    8,   0x25,
                                  1,    2,    3,    4,    0x2a, 0x02, 0x7a, 0x7a, 0x0a, 0x02, 0x68, 0x69});
  REQUIRE(body.size() == 25);
  const std::string wire = bytes({0x00, 0x00, 0x00, 0x00, 0x19}) + body;
  CHECK(stream_every_split(wire) == "hi");
  const auto r = parse_message(wire, message_kind::hunk);
  REQUIRE(r.complete());
  CHECK(r.value.chunks.at(0) == "hi");
}

TEST_CASE("gun: several messages back to back, and the message boundary", "[gun]") {
  const std::string wire = encode_hunk("GET ") + encode_hunk("/ HTTP/1.1") + encode_hunk("");
  stream_decoder d(message_kind::hunk);
  std::string out;
  const auto step = d.decode(std::string_view(wire).substr(0, wire.size() - 2), out);
  CHECK(step.reason.empty());
  CHECK(out == "GET / HTTP/1.1");
  CHECK_FALSE(d.at_boundary());  // half of the empty message's prefix is still to come
  CHECK(d.decode(std::string_view(wire).substr(wire.size() - 2), out).reason.empty());
  CHECK(d.at_boundary());
  CHECK(d.messages() == 3);
  const auto first = parse_message(wire, message_kind::hunk);
  REQUIRE(first.complete());
  CHECK(first.consumed == 11);  // 5 + tag + length + "GET "
}

TEST_CASE("gun: partial messages need more", "[gun]") {
  const std::string wire = encode_hunk("abc");
  for (std::size_t n = 0; n < wire.size(); ++n) CHECK(parse_message(wire.substr(0, n), message_kind::hunk).need_more());
}

TEST_CASE("gun: violations are refused with their reason", "[gun]") {
  const auto msg = [](std::initializer_list<int> body) {
    std::string b = bytes(body);
    return bytes({0, 0, 0, 0, static_cast<int>(b.size())}) + b;
  };
  const std::string compressed = bytes({0x01, 0x00, 0x00, 0x00, 0x00});
  const std::string bad_flag = bytes({0x02, 0x00, 0x00, 0x00, 0x00});
  const std::string group = msg({0x13, 0x14});             // field 2, wire type 3 (start group)
  const std::string wire6 = msg({0x0e, 0x00});             // field 1, wire type 6
  const std::string field0 = msg({0x02, 0x00});            // field 0, LEN
  const std::string data_varint = msg({0x08, 0x01});       // field 1 as a varint
  const std::string overrun = msg({0x0a, 0x05, 0x61});     // says 5 bytes, has 1
  const std::string tag_only = msg({0x10});                // field 2 varint with no value
  const std::string fixed_overrun = msg({0x19, 1, 2, 3});  // I64 with 3 bytes
  const std::string long_varint = msg({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  const std::pair<const std::string*, const char*> cases[] = {{&compressed, "compressed_message"},
                                                              {&bad_flag, "bad_compressed_flag"},
                                                              {&group, "group_wire_type"},
                                                              {&wire6, "bad_wire_type"},
                                                              {&field0, "bad_field_number"},
                                                              {&data_varint, "data_wrong_wire_type"},
                                                              {&overrun, "field_overruns_message"},
                                                              {&tag_only, "field_overruns_message"},
                                                              {&fixed_overrun, "field_overruns_message"},
                                                              {&long_varint, "varint_too_long"}};
  for (const auto& [wire, reason] : cases) {
    INFO(reason);
    CHECK(parse_reason(*wire) == reason);
    CHECK(stream_all(*wire, 1) == std::string("!") + reason);
    CHECK(stream_all(*wire, wire->size()) == std::string("!") + reason);
  }
}

TEST_CASE("gun: the message size cap", "[gun]") {
  const std::string wire = encode_hunk(std::string(100, 'a'));  // a 102-byte message
  CHECK(parse_message(wire, message_kind::hunk, 102).complete());
  const auto r = parse_message(wire.substr(0, 5), message_kind::hunk, 101);
  REQUIRE(r.invalid());
  CHECK(r.reason == "message_too_large");
  CHECK(stream_all(wire, 3, message_kind::hunk, 101) == "!message_too_large");
  // 00 ffffffff: refused from its prefix alone, without waiting for 4 GiB.
  CHECK(parse_reason(bytes({0x00, 0xff, 0xff, 0xff, 0xff})) == "message_too_large");
}

TEST_CASE("gun: a failed decoder stays failed", "[gun]") {
  stream_decoder d(message_kind::hunk);
  std::string out;
  CHECK(d.decode(bytes({0x01, 0, 0, 0, 0}), out).reason == "compressed_message");
  CHECK(d.failed());
  const auto again = d.decode(encode_hunk("abc"), out);
  CHECK(again.reason == "compressed_message");
  CHECK(again.consumed == 0);
  CHECK(out.empty());
}
