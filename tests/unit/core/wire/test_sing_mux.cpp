// core/wire/sing_mux, smux_frame, yamux_frame and core/runtime/sing_mux_bridge: sing-mux's session and stream
// requests, smux and yamux frames byte for byte (from sing-mux's, smux's and yamux's public descriptions), and
// the bridge's rules: what it hands the Mux.Cool relay, what it answers the client, what it refuses.
#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/runtime/sing_mux_bridge.hpp"
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

// The Mux.Cool frames of a relay-bound byte string.
std::vector<mux::frame> frames(const std::string& in) {
  std::vector<mux::frame> out;
  std::string_view v(in);
  while (!v.empty()) {
    const auto r = mux::parse_mux_frame(v);
    REQUIRE(r.complete());
    out.push_back(r.value);
    v.remove_prefix(r.consumed);
  }
  return out;
}

std::string keep(std::uint16_t id, const std::string& data, std::optional<mux::target> dest = {}) {
  std::string out;
  mux::frame f;
  f.id = id;
  f.st = mux::status::keep;
  f.option = mux::option_data;
  f.data = data;
  f.dest = std::move(dest);
  mux::encode_mux_frame(out, f);
  return out;
}

std::string end(std::uint16_t id, bool error) {
  std::string out;
  mux::frame f;
  f.id = id;
  f.st = mux::status::end;
  f.option = error ? mux::option_error : 0;
  mux::encode_mux_frame(out, f);
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

TEST_CASE("sing-mux bridge: smux TCP stream becomes a Mux.Cool sub, answers carry the status byte", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 3), relay, client).empty());
  CHECK(relay.empty());
  CHECK(b.up(smux_frame(2, 3, tcp_request + "GET /"), relay, client).empty());
  auto f = frames(relay);
  REQUIRE(f.size() == 1);
  CHECK(f[0].st == mux::status::new_sub);
  CHECK(mux::format_target(*f[0].dest) == "127.0.0.1:8080");
  CHECK(f[0].data == "GET /");
  const auto id = f[0].id;
  relay.clear();
  CHECK(b.down(keep(id, "HTTP") + keep(id, "/1.1"), client).empty());
  CHECK(client == smux_frame(2, 3, "\0HTTP"s) + smux_frame(2, 3, "/1.1"));
  client.clear();
  CHECK(b.up(smux_frame(1, 3), relay, client).empty());  // the client's FIN: End to the relay
  f = frames(relay);
  REQUIRE(f.size() == 1);
  CHECK(f[0].st == mux::status::end);
  CHECK(b.down(end(id, false), client).empty());  // and the relay's End: a FIN back
  CHECK(client == smux_frame(1, 3));
  CHECK(b.live() == 0);
}

TEST_CASE("sing-mux bridge: a sub the relay refuses answers status 1 with a message", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 3) + smux_frame(2, 3, tcp_request), relay, client).empty());
  const auto id = frames(relay).at(0).id;
  CHECK(b.down(end(id, true), client).empty());
  const auto first = smux::parse_frame(client);
  REQUIRE(first.complete());
  CHECK(first.value.c == smux::cmd::psh);
  REQUIRE(first.value.data.size() > 2);
  CHECK(first.value.data[0] == 1);  // statusError, then a uvarint-length message
  CHECK(static_cast<std::size_t>(first.value.data[1]) == first.value.data.size() - 2);
}

TEST_CASE("sing-mux bridge: yamux SYN is acknowledged at once, pings answered, windows kept", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  CHECK(b.up(bytes({0x00, 0x01}) + yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0), relay, client)
            .empty());
  CHECK(client == yamux_frame(yamux::type::window_update, yamux::flag_ack, 1, 0));
  client.clear();
  CHECK(b.up(yamux_frame(yamux::type::ping, yamux::flag_syn, 0, 77), relay, client).empty());
  CHECK(client == yamux_frame(yamux::type::ping, yamux::flag_ack, 0, 77));
  client.clear();
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, tcp_request.size(), tcp_request), relay, client).empty());
  const auto id = frames(relay).at(0).id;
  // 256 KiB + 1 for the client: the window takes 256 KiB, the rest waits for the client's update.
  const std::string big((256u << 10) + 1, 'x');
  for (std::size_t off = 0; off < big.size(); off += 0xffff)
    CHECK(b.down(keep(id, big.substr(off, 0xffff)), client).empty());
  std::size_t sent = 0;
  for (std::string_view v(client); !v.empty();) {
    const auto r = yamux::parse_frame(v);
    REQUIRE(r.complete());
    sent += r.value.data.size();
    v.remove_prefix(r.consumed);
  }
  CHECK(sent == (256u << 10));  // the status byte and 256 KiB - 1 of data
  CHECK(b.held() == 2);
  client.clear();
  CHECK(b.up(yamux_frame(yamux::type::window_update, 0, 1, 10), relay, client).empty());
  CHECK(client == yamux_frame(yamux::type::data, 0, 1, 2, "xx"));
  CHECK(b.held() == 0);
}

TEST_CASE("sing-mux bridge: yamux windows are credited per 128 KiB the relay has read, data past one ends the session",
          "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  const std::string syn = yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0);
  CHECK(b.up(bytes({0x00, 0x01}) + syn, relay, client).empty());
  client.clear();
  const std::string half = tcp_request + std::string((128u << 10) - tcp_request.size(), 'y');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, half.size(), half), relay, client).empty());
  CHECK(client.empty());  // not credited before the relay has read it
  b.relay_consumed(relay.size() - 1, client);
  CHECK(client.empty());
  b.relay_consumed(1, client);
  relay.clear();
  // 128 KiB read by the relay: credited back, the window is whole again.
  CHECK(client == yamux_frame(yamux::type::window_update, 0, 1, 128u << 10));
  client.clear();
  const std::string part(100u << 10, 'y');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, part.size(), part), relay, client).empty());
  b.relay_consumed(relay.size(), client);
  CHECK(client.empty());  // under 128 KiB since the last update: no update yet
  // 156 KiB of the window left; 156 KiB + 1 is past it.
  const std::string over((156u << 10) + 1, 'z');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, over.size(), over), relay, client) == "window_exceeded");
  CHECK(b.up(syn, relay, client) == "window_exceeded");  // and the session stays ended
}

TEST_CASE("sing-mux bridge: a duplicate yamux open and a bad frame end the session", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  const std::string syn = yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0);
  CHECK(b.up(bytes({0x00, 0x01}) + syn, relay, client).empty());
  CHECK(b.up(syn, relay, client) == "duplicate_stream");
  sing_mux::bridge c(4);
  CHECK(c.up(bytes({0x00, 0x00}) + bytes({0x07, 0x00}), relay, client) == "bad_version");
  sing_mux::bridge d(4);
  CHECK(d.up(bytes({0x00, 0x02}), relay, client) == "h2mux_unsupported");
  sing_mux::bridge e(4);
  CHECK(e.up(bytes({0x05, 0x00}), relay, client) == "unknown_version");
}

TEST_CASE("sing-mux bridge: a stream flood past the limit is refused stream by stream", "[sing_mux]") {
  sing_mux::bridge b(2);
  std::string relay, client;
  std::string in = bytes({0x00, 0x00});
  for (std::uint32_t sid = 1; sid <= 7; sid += 2) in += smux_frame(0, sid) + smux_frame(2, sid, tcp_request);
  CHECK(b.up(in, relay, client).empty());
  CHECK(frames(relay).size() == 2);  // two New frames; streams 5 and 7 refused
  CHECK(b.refused() == 2);
  const auto r = b.take_refusals();
  REQUIRE(r.size() == 2);
  CHECK(r[0].stream == 5);
  CHECK(r[0].reason == "too_many_streams");
  CHECK(b.live() == 2);
}

TEST_CASE("sing-mux bridge: refused streams are remembered for their close, the latest 4096 only", "[sing_mux]") {
  sing_mux::bridge b(1);
  std::string relay, client;
  const auto syn = [](std::uint32_t sid) { return yamux_frame(yamux::type::window_update, yamux::flag_syn, sid, 0); };
  std::string in = bytes({0x00, 0x01}) + syn(1) + syn(3);  // 1 live, 3 refused
  CHECK(b.up(in, relay, client).empty());
  CHECK(b.up(syn(3), relay, client) == "duplicate_stream");  // still known: a SYN for it again ends the session
  sing_mux::bridge c(1);
  in = bytes({0x00, 0x01}) + syn(1) + syn(3);
  for (std::uint32_t sid = 5; sid < 5 + 2 * 4096; sid += 2) in += syn(sid);
  CHECK(c.up(in, relay, client).empty());
  CHECK(c.refused() == 4097);
  // 4096 refused after it: stream 3 is forgotten, its id opens (and is refused) again.
  CHECK(c.up(syn(3), relay, client).empty());
  CHECK(c.refused() == 4098);
}

TEST_CASE("sing-mux bridge: bytes on a refused stream are credited at once", "[sing_mux]") {
  sing_mux::bridge b(1);
  std::string relay, client;
  std::string in = bytes({0x00, 0x01}) + yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0) +
                   yamux_frame(yamux::type::window_update, yamux::flag_syn, 3, 0);
  CHECK(b.up(in, relay, client).empty());
  client.clear();
  const std::string half(128u << 10, 'x');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 3, half.size(), half), relay, client).empty());
  CHECK(relay.empty());  // nothing for the relay, and no relay_consumed needed for the window to come back
  CHECK(client == yamux_frame(yamux::type::window_update, 0, 3, 128u << 10));
}

TEST_CASE("sing-mux bridge: bad stream requests are refused with their reason", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 1) + smux_frame(2, 1, bytes({0x00, 0x09})), relay, client).empty());
  CHECK(b.up(smux_frame(0, 3) + smux_frame(2, 3, bytes({0x00, 0x00, 0x01, 1, 2, 3, 4, 0, 0})), relay, client).empty());
  CHECK(relay.empty());
  const auto r = b.take_refusals();
  REQUIRE(r.size() == 2);
  CHECK(r[0].reason == "unknown_flags");
  CHECK(r[1].reason == "port_zero");
  CHECK(b.live() == 0);
}

TEST_CASE("sing-mux bridge: UDP per-packet addresses open with the first packet's destination", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  const std::string req = bytes({0x00, 0x03, 0x03, 20}) + "sp.mux.sing-box.arpa" + bytes({0x01, 0xbc});
  const std::string pkt1 = bytes({0x01, 127, 0, 0, 1, 0x13, 0x89, 0x00, 0x02}) + "p1";
  const std::string pkt2 = bytes({0x01, 127, 0, 0, 1, 0x13, 0x8a, 0x00, 0x02}) + "p2";
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 1) + smux_frame(2, 1, req + pkt1 + pkt2.substr(0, 4)), relay, client)
            .empty());
  auto f = frames(relay);
  REQUIRE(f.size() == 1);
  CHECK(f[0].st == mux::status::new_sub);
  CHECK(mux::format_target(*f[0].dest) == "127.0.0.1:5001");
  CHECK(f[0].dest->net == mux::network::udp);
  CHECK(f[0].data == "p1");
  relay.clear();
  CHECK(b.up(smux_frame(2, 1, pkt2.substr(4)), relay, client).empty());
  f = frames(relay);
  REQUIRE(f.size() == 1);
  CHECK(f[0].st == mux::status::keep);
  CHECK(mux::format_target(*f[0].dest) == "127.0.0.1:5002");
  // A reply without a target names the first packet's; one with its own carries it.
  CHECK(b.down(keep(f[0].id, "r1"), client).empty());
  CHECK(client == smux_frame(2, 1, "\0"s + bytes({0x01, 127, 0, 0, 1, 0x13, 0x89, 0x00, 0x02}) + "r1"));
}

TEST_CASE("sing-mux bridge: padding of the first records both ways", "[sing_mux]") {
  sing_mux::bridge b(4);
  std::string relay, client;
  std::string in = sing_mux::encode_request({1, sing_mux::protocol::smux, true}, 5);
  sing_mux::encode_padded_record(in, smux_frame(0, 1), 300);
  sing_mux::encode_padded_record(in, smux_frame(2, 1, tcp_request + "x"), 256);
  CHECK(b.up(in, relay, client).empty());
  const auto f = frames(relay);
  REQUIRE(f.size() == 1);
  CHECK(f[0].data == "x");
  const std::string sealed = b.seal("abc");
  REQUIRE(sealed.size() >= 4 + 3 + 256);
  CHECK(sealed.substr(0, 2) == bytes({0x00, 0x03}));
  CHECK(sealed.substr(4, 3) == "abc");
}
