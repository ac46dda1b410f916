#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/wire/ws_frame.hpp"

using namespace vlessbench;
using namespace vlessbench::ws;
using vlessbench::test::bytes;

namespace {

const frame_rules client_rules{true, 1u << 20};
const frame_rules server_rules{false, 1u << 20};

// A client frame: masked with the RFC 6455 §5.7 key 37 fa 21 3d.
std::string client_frame(opcode op, bool fin, const std::string& payload) {
  const mask_key key{0x37, 0xfa, 0x21, 0x3d};
  char head[max_header_bytes];
  const std::size_t n = encode_frame_header(head, op, fin, payload.size(), &key);
  std::string body = payload;
  apply_mask(body.data(), body.size(), key, 0);
  return std::string(head, n) + body;
}

// Decodes text split into pieces of `chunk` bytes; returns the payload, or "!reason".
std::string decode_all(frame_decoder& d, std::string text, std::size_t chunk) {
  std::string out;
  for (std::size_t at = 0; at < text.size(); at += chunk) {
    std::string piece = text.substr(at, chunk);
    const auto step = d.decode(piece.data(), piece.size());
    if (!step.reason.empty()) return "!" + std::string(step.reason);
    out.append(piece.data(), step.payload);
  }
  return out;
}

}  // namespace

TEST_CASE("ws frame headers: the RFC 6455 §5.7 examples", "[ws]") {
  // A single-frame unmasked text message "Hello" (server to client).
  const std::string hello = bytes({0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f});
  auto r = parse_frame_header(hello, server_rules);
  REQUIRE(r.complete());
  CHECK(r.consumed == 2);
  CHECK(r.value.fin);
  CHECK(r.value.op == opcode::text);
  CHECK(r.value.length == 5);
  // A single-frame masked text message "Hello" (client to server).
  std::string masked = bytes({0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58});
  r = parse_frame_header(masked, client_rules);
  REQUIRE(r.complete());
  CHECK(r.consumed == 6);
  CHECK(r.value.mask == mask_key{0x37, 0xfa, 0x21, 0x3d});
  apply_mask(masked.data() + 6, 5, r.value.mask, 0);
  CHECK(masked.substr(6) == "Hello");
  // 256 bytes binary in a single unmasked frame: 0x82 0x7E 0x0100; 64 KiB: 0x82 0x7F 0x0000000000010000.
  r = parse_frame_header(bytes({0x82, 0x7e, 0x01, 0x00}), server_rules);
  REQUIRE(r.complete());
  CHECK(r.value.length == 256);
  r = parse_frame_header(bytes({0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00}), server_rules);
  REQUIRE(r.complete());
  CHECK(r.value.length == 65536);
  CHECK(r.consumed == 10);
  // An unmasked ping with "Hello", and the masked pong answering it.
  r = parse_frame_header(bytes({0x89, 0x05}), server_rules);
  REQUIRE(r.complete());
  CHECK(r.value.op == opcode::ping);
  r = parse_frame_header(bytes({0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d}), client_rules);
  REQUIRE(r.complete());
  CHECK(r.value.op == opcode::pong);
}

TEST_CASE("ws frame headers: encode parses back at each length size", "[ws]") {
  for (std::uint64_t len : {0ull, 125ull, 126ull, 65535ull, 65536ull, 1048576ull}) {
    const mask_key key{1, 2, 3, 4};
    char head[max_header_bytes];
    const std::size_t n = encode_frame_header(head, opcode::binary, true, len, &key);
    CHECK(n == (len < 126 ? 6u : len <= 0xffff ? 8u : 14u));
    const auto r = parse_frame_header(std::string_view(head, n), client_rules);
    REQUIRE(r.complete());
    CHECK(r.consumed == n);
    CHECK(r.value.length == len);
    CHECK(r.value.mask == key);
    // Every proper prefix needs more.
    for (std::size_t k = 0; k < n; ++k) CHECK(parse_frame_header(std::string_view(head, k), client_rules).need_more());
  }
}

TEST_CASE("ws frame headers: violations are refused with a reason", "[ws]") {
  auto reason = [](const std::string& b, const frame_rules& rules) {
    const auto r = parse_frame_header(b, rules);
    return r.invalid() ? std::string(r.reason) : std::string("(accepted)");
  };
  CHECK(reason(bytes({0x82, 0x05}), client_rules) == "unmasked_client_frame");
  CHECK(reason(bytes({0x82, 0x85}), server_rules) == "masked_server_frame");
  CHECK(reason(bytes({0xc2, 0x80}), client_rules) == "rsv_bits_set");
  CHECK(reason(bytes({0x83, 0x80}), client_rules) == "unknown_opcode");
  CHECK(reason(bytes({0x09, 0x80}), client_rules) == "control_frame_fragmented");
  CHECK(reason(bytes({0x89, 0xfe}), client_rules) == "control_frame_too_long");
  CHECK(reason(bytes({0x82, 0xfe, 0x00, 0x7d, 0, 0, 0, 0}), client_rules) == "non_minimal_length");
  CHECK(reason(bytes({0x82, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}), client_rules) == "non_minimal_length");
  CHECK(reason(bytes({0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), client_rules) == "length_msb_set");
  CHECK(reason(bytes({0x82, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 1, 0, 0, 0, 0}), client_rules) == "frame_too_large");
}

TEST_CASE("ws frame_decoder: payload of fragmented binary messages, any split", "[ws]") {
  const std::string stream = client_frame(opcode::binary, false, "VLESS ") + client_frame(opcode::ping, true, "hi") +
                             client_frame(opcode::continuation, false, "") +
                             client_frame(opcode::continuation, true, std::string(300, 'x')) +
                             client_frame(opcode::binary, true, "end");
  for (std::size_t chunk : {1u, 2u, 3u, 7u, 64u, 4096u}) {
    frame_decoder d(client_rules);
    CHECK(decode_all(d, stream, chunk) == "VLESS " + std::string(300, 'x') + "end");
    REQUIRE(d.controls().size() == 1);
    CHECK(d.controls()[0].op == opcode::ping);
    CHECK(d.controls()[0].payload == "hi");
    CHECK_FALSE(d.mid_header());
  }
}

TEST_CASE("ws frame_decoder: close, and the stream rules", "[ws]") {
  SECTION("close with a code ends the stream") {
    frame_decoder d(client_rules);
    CHECK(decode_all(d,
                     client_frame(opcode::binary, true, "ab") + client_frame(opcode::close, true, bytes({0x03, 0xe8})),
                     5) == "ab");
    CHECK(d.close_received());
    REQUIRE(d.controls().size() == 1);
    CHECK(close_code(d.controls()[0].payload) == close_normal);
    CHECK(decode_all(d, client_frame(opcode::binary, true, "late"), 100) == "!frame_after_close");
  }
  SECTION("violations") {
    frame_decoder a(client_rules);
    CHECK(decode_all(a, client_frame(opcode::text, true, "t"), 100) == "!text_frame");
    frame_decoder b(client_rules);
    CHECK(decode_all(b, client_frame(opcode::continuation, true, "c"), 100) == "!unexpected_continuation");
    frame_decoder c(client_rules);
    CHECK(decode_all(c, client_frame(opcode::binary, false, "a") + client_frame(opcode::binary, true, "b"), 100) ==
          "!interleaved_message");
    frame_decoder e(client_rules);
    CHECK(decode_all(e, client_frame(opcode::close, true, "x"), 100) == "!bad_close_payload");
    frame_decoder f(client_rules);
    CHECK(decode_all(f, bytes({0x82, 0x03}) + "abc", 100) == "!unmasked_client_frame");
    CHECK(f.failed());
  }
  SECTION("a frame over the cap") {
    frame_decoder d(frame_rules{true, 1000});
    CHECK(decode_all(d, client_frame(opcode::binary, true, std::string(1001, 'y')), 4096) == "!frame_too_large");
  }
}

TEST_CASE("ws apply_mask: any offset and length match the byte-wise rule", "[ws]") {
  const mask_key key{0xde, 0xad, 0xbe, 0xef};
  for (std::uint64_t offset : {0ull, 1ull, 2ull, 3ull, 5ull}) {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 33u}) {
      std::string data(n, '\0');
      for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 7);
      std::string want = data;
      for (std::size_t i = 0; i < n; ++i)
        want[i] = static_cast<char>(want[i] ^ static_cast<char>(key[(offset + i) % 4]));
      apply_mask(data.data(), n, key, offset);
      CHECK(data == want);
    }
  }
}
