// core/wire/sing_mux, smux_frame, yamux_frame: sing-mux's session and stream requests, smux and yamux frames
// byte for byte (from sing-mux's, smux's and yamux's public descriptions). The framing built on them is
// tests/unit/server/test_sing_mux_framing.cpp.
#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/wire/sing_mux.hpp"
#include "core/wire/smux_frame.hpp"
#include "core/wire/yamux_frame.hpp"

using namespace vlessbench;
using namespace std::string_literals;
using vlessbench::test::bytes;

namespace {

std::string smux_frame(std::uint8_t cmd, std::uint32_t sid, const std::string& data = {}) {
  std::string out;
  smux::encode_frame(out, 1, static_cast<smux::cmd>(cmd), sid, data);
  return out;
}

std::string yamux_frame(yamux::type t, std::uint16_t flags, std::uint32_t sid, std::uint32_t len,
                        const std::string& data = {}) {
  std::string out;
  yamux::encode_frame(out, t, flags, sid, len, data);
  return out;
}

// Stream request: TCP to 127.0.0.1:8080.
const std::string tcp_request = bytes({0x00, 0x00, 0x01, 127, 0, 0, 1, 0x1f, 0x90});

}  // namespace

TEST_CASE("sing-mux request: version 0 and version 1 with and without padding", "[sing_mux]") {
  auto r = sing_mux::parse_request(bytes({0x00, 0x01}));
  REQUIRE(r.complete());
  CHECK(r.consumed == 2);
  CHECK(r.value.proto == sing_mux::protocol::yamux);
  CHECK_FALSE(r.value.padding);
  r = sing_mux::parse_request(bytes({0x01, 0x00, 0x00}));
  REQUIRE(r.complete());
  CHECK(r.consumed == 3);
  r = sing_mux::parse_request(bytes({0x01, 0x00, 0x01, 0x00, 0x03, 9, 9, 9}) + "rest");
  REQUIRE(r.complete());
  CHECK(r.consumed == 8);
  CHECK(r.value.padding);
  CHECK(sing_mux::parse_request(bytes({0x01, 0x00, 0x01, 0x00, 0x03, 9})).need_more());
  CHECK(sing_mux::encode_request({1, sing_mux::protocol::smux, true}, 3) ==
        bytes({0x01, 0x00, 0x01, 0x00, 0x03, 0, 0, 0}));
}

TEST_CASE("sing-mux request: unknown version, protocol and padding flag are refused", "[sing_mux]") {
  CHECK(sing_mux::parse_request(bytes({0x02, 0x00})).reason == "unknown_version");
  CHECK(sing_mux::parse_request(bytes({0x00, 0x03})).reason == "unknown_protocol");
  CHECK(sing_mux::parse_request(bytes({0x01, 0x00, 0x02})).reason == "bad_padding_flag");
}

TEST_CASE("sing-mux stream request: TCP, UDP, UDP with per-packet addresses, and refusals", "[sing_mux]") {
  auto r = sing_mux::parse_stream_request(tcp_request + "GET");
  REQUIRE(r.complete());
  CHECK(r.consumed == tcp_request.size());
  CHECK(r.value.dest.net == mux::network::tcp);
  CHECK(r.value.dest.port == 8080);
  CHECK(r.value.dest.address == bytes({127, 0, 0, 1}));
  CHECK(sing_mux::encode_stream_request(r.value) == tcp_request);
  r = sing_mux::parse_stream_request(bytes({0x00, 0x03, 0x03, 4}) + "a.bc" + bytes({0x00, 0x35}));
  REQUIRE(r.complete());
  CHECK(r.value.dest.net == mux::network::udp);
  CHECK(r.value.packet_addr);
  CHECK(r.value.dest.type == mux::address_type::domain);
  CHECK(mux::format_target(r.value.dest) == "a.bc:53");
  CHECK(sing_mux::parse_stream_request(bytes({0x00, 0x00, 0x04, 0, 0})).need_more());
  CHECK(sing_mux::parse_stream_request(bytes({0x00, 0x04, 0x01})).reason == "unknown_flags");
  CHECK(sing_mux::parse_stream_request(bytes({0x00, 0x02, 0x01})).reason == "addr_without_udp");
  CHECK(sing_mux::parse_stream_request(bytes({0x00, 0x00, 0x02})).reason == "unknown_address_type");
  CHECK(sing_mux::parse_stream_request(bytes({0x00, 0x00, 0x03, 0x00})).reason == "empty_domain");
}

TEST_CASE("sing-mux UDP packets: length-prefixed, with an address first on per-packet streams", "[sing_mux]") {
  const std::string two = bytes({0x00, 0x02}) + "hiX";
  auto p = sing_mux::parse_udp_packet(two, false);
  REQUIRE(p.complete());
  CHECK(p.consumed == 4);
  CHECK(p.value.data == "hi");
  CHECK_FALSE(p.value.dest);
  CHECK(sing_mux::parse_udp_packet(bytes({0x00, 0x05}) + "hi", false).need_more());
  const std::string addressed = bytes({0x01, 10, 0, 0, 1, 0x00, 0x35, 0x00, 0x01}) + "q";
  p = sing_mux::parse_udp_packet(addressed, true);
  REQUIRE(p.complete());
  REQUIRE(p.value.dest);
  CHECK(p.value.dest->port == 53);
  CHECK(p.value.dest->net == mux::network::udp);
  std::string again;
  sing_mux::encode_udp_packet(again, &*p.value.dest, "q");
  CHECK(again == addressed);
  CHECK(sing_mux::parse_udp_packet(bytes({0x07}), true).reason == "unknown_address_type");
}

TEST_CASE("sing-mux padding: the first 16 records lose their padding, later bytes pass", "[sing_mux]") {
  sing_mux::unpadder u;
  std::string in;
  for (int i = 0; i < 16; ++i) sing_mux::encode_padded_record(in, "r" + std::to_string(i % 10), 3);
  in += "tail";
  std::string out;
  for (char c : in) u.feed(std::string_view(&c, 1), out);  // byte by byte: every cut is a need-more
  CHECK(out == "r0r1r2r3r4r5r6r7r8r9r0r1r2r3r4r5tail");
  CHECK(u.done());
}

TEST_CASE("smux frames: header layout, UPD, and refusals", "[sing_mux]") {
  const std::string psh = bytes({0x01, 0x02, 0x03, 0x00, 0x05, 0x00, 0x00, 0x00}) + "abc";
  auto r = smux::parse_frame(psh);
  REQUIRE(r.complete());
  CHECK(r.consumed == psh.size());
  CHECK(r.value.c == smux::cmd::psh);
  CHECK(r.value.sid == 5);
  CHECK(r.value.data == "abc");
  CHECK(smux_frame(2, 5, "abc") == psh);
  CHECK(smux::parse_frame(psh.substr(0, 10)).need_more());
  std::string upd;
  smux::encode_upd(upd, 3, 1000, 262144);
  r = smux::parse_frame(upd);
  REQUIRE(r.complete());
  CHECK(r.value.c == smux::cmd::upd);
  CHECK(r.value.consumed == 1000);
  CHECK(r.value.window == 262144);
  CHECK(smux::parse_frame(bytes({0x03, 0x00})).reason == "bad_version");
  CHECK(smux::parse_frame(bytes({0x01, 0x05})).reason == "unknown_cmd");
  CHECK(smux::parse_frame(bytes({0x01, 0x04})).reason == "upd_in_version_1");
  CHECK(smux::parse_frame(bytes({0x02, 0x04, 0x02, 0x00, 1, 0, 0, 0})).reason == "bad_upd_length");
}

TEST_CASE("yamux frames: header layout, payload only on Data, and refusals", "[sing_mux]") {
  const std::string data = bytes({0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02}) + "hi";
  auto r = yamux::parse_frame(data);
  REQUIRE(r.complete());
  CHECK(r.consumed == data.size());
  CHECK(r.value.flags == yamux::flag_syn);
  CHECK(r.value.stream == 3);
  CHECK(r.value.data == "hi");
  CHECK(yamux_frame(yamux::type::data, yamux::flag_syn, 3, 2, "hi") == data);
  r = yamux::parse_frame(bytes({0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00}));
  REQUIRE(r.complete());
  CHECK(r.consumed == 12);  // a window update's length is its value, not a payload
  CHECK(r.value.length == 0x40000);
  CHECK(yamux::parse_frame(bytes({0x01})).reason == "bad_version");
  CHECK(yamux::parse_frame(bytes({0x00, 0x04})).reason == "unknown_type");
  CHECK(yamux::parse_frame(bytes({0x00, 0x00, 0x00, 0x10, 0, 0, 0, 1, 0, 0, 0, 0})).reason == "unknown_flags");
  CHECK(yamux::parse_frame(bytes({0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0})).reason == "stream_zero");
  CHECK(yamux::parse_frame(bytes({0x00, 0x02, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 0})).reason ==
        "session_frame_on_stream");
  CHECK(yamux::parse_frame(bytes({0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1, 0, 4, 0, 1})).reason == "data_too_long");
}
