// The sing-mux framing (server/sing_mux_framing.hpp): what it hands the sub-connection engine (open, data, end
// and credit events), what it answers the client, what it refuses.
#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/wire/sing_mux.hpp"
#include "core/wire/smux_frame.hpp"
#include "core/wire/yamux_frame.hpp"
#include "server/sing_mux_framing.hpp"

using namespace vlessbench;
using namespace std::string_literals;
using vlessbench::test::bytes;
using kind = sing_mux::sub_event::kind_t;

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

std::size_t count(const sing_mux::sub_events& ev, kind k) {
  std::size_t n = 0;
  for (const auto& e : ev) n += e.kind == k ? 1 : 0;
  return n;
}

// The engine takes every event: credits applied, the rest dropped.
void take(sing_mux::framing& b, sing_mux::sub_events& ev, std::string& client) {
  for (const auto& e : ev)
    if (e.kind == kind::credit) b.consumed(e.stream, e.bytes, client);
  ev.clear();
}

// Stream request: TCP to 127.0.0.1:8080.
const std::string tcp_request = bytes({0x00, 0x00, 0x01, 127, 0, 0, 1, 0x1f, 0x90});

}  // namespace

TEST_CASE("sing-mux framing: smux TCP stream opens a sub, answers carry the status byte", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 3), ev, client).empty());
  CHECK(ev.empty());
  CHECK(b.up(smux_frame(2, 3, tcp_request + "GET /"), ev, client).empty());
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind == kind::open);
  CHECK(format_destination(*ev[0].dest) == "127.0.0.1:8080");
  CHECK(ev[0].has_data);
  CHECK(ev[0].data == "GET /");
  CHECK(ev[1].kind == kind::credit);  // its bytes credited once the engine took the open
  CHECK(ev[1].stream == 3);
  CHECK(ev[1].bytes == tcp_request.size() + 5);
  const auto id = ev[0].id;
  ev.clear();
  b.send(id, "HTTP", nullptr, client);
  b.send(id, "/1.1", nullptr, client);
  CHECK(client == smux_frame(2, 3, "\0HTTP"s) + smux_frame(2, 3, "/1.1"));
  client.clear();
  CHECK(b.up(smux_frame(1, 3), ev, client).empty());  // the client's FIN: the sub's end
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == kind::end);
  CHECK(ev[0].id == id);
  b.closed(id, false, client);  // and the engine's close: a FIN back
  CHECK(client == smux_frame(1, 3));
  CHECK(b.live() == 0);
}

TEST_CASE("sing-mux framing: a sub the engine refuses answers status 1 with a message", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 3) + smux_frame(2, 3, tcp_request), ev, client).empty());
  const auto id = ev.at(0).id;
  b.closed(id, true, client);
  const auto first = smux::parse_frame(client);
  REQUIRE(first.complete());
  CHECK(first.value.c == smux::cmd::psh);
  REQUIRE(first.value.data.size() > 2);
  CHECK(first.value.data[0] == 1);  // statusError, then a uvarint-length message
  CHECK(static_cast<std::size_t>(first.value.data[1]) == first.value.data.size() - 2);
}

TEST_CASE("sing-mux framing: yamux SYN is acknowledged at once, pings answered, windows kept", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(bytes({0x00, 0x01}) + yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0), ev, client).empty());
  CHECK(client == yamux_frame(yamux::type::window_update, yamux::flag_ack, 1, 0));
  client.clear();
  CHECK(b.up(yamux_frame(yamux::type::ping, yamux::flag_syn, 0, 77), ev, client).empty());
  CHECK(client == yamux_frame(yamux::type::ping, yamux::flag_ack, 0, 77));
  client.clear();
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, tcp_request.size(), tcp_request), ev, client).empty());
  const auto id = ev.at(0).id;
  // 256 KiB + 1 for the client: the window takes 256 KiB, the rest waits for the client's update.
  const std::string big((256u << 10) + 1, 'x');
  for (std::size_t off = 0; off < big.size(); off += 0xffff) b.send(id, big.substr(off, 0xffff), nullptr, client);
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
  CHECK(b.up(yamux_frame(yamux::type::window_update, 0, 1, 10), ev, client).empty());
  CHECK(client == yamux_frame(yamux::type::data, 0, 1, 2, "xx"));
  CHECK(b.held() == 0);
}

TEST_CASE(
    "sing-mux framing: yamux windows are credited per 128 KiB the engine has taken, data past one ends the "
    "session",
    "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  const std::string syn = yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0);
  CHECK(b.up(bytes({0x00, 0x01}) + syn, ev, client).empty());
  client.clear();
  const std::string half = tcp_request + std::string((128u << 10) - tcp_request.size(), 'y');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, half.size(), half), ev, client).empty());
  CHECK(client.empty());  // not credited before the engine has taken it
  REQUIRE(ev.size() == 2);
  CHECK(ev[1].kind == kind::credit);
  CHECK(ev[1].bytes == (128u << 10));
  take(b, ev, client);
  // 128 KiB taken by the engine: credited back, the window is whole again.
  CHECK(client == yamux_frame(yamux::type::window_update, 0, 1, 128u << 10));
  client.clear();
  const std::string part(100u << 10, 'y');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, part.size(), part), ev, client).empty());
  take(b, ev, client);
  CHECK(client.empty());  // under 128 KiB since the last update: no update yet
  // 156 KiB of the window left; 156 KiB + 1 is past it.
  const std::string over((156u << 10) + 1, 'z');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 1, over.size(), over), ev, client) == "window_exceeded");
  CHECK(b.up(syn, ev, client) == "window_exceeded");  // and the session stays ended
}

TEST_CASE("sing-mux framing: a credit waits behind the events before it, with none waiting it is given at once",
          "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  const auto syn = [](std::uint32_t sid) { return yamux_frame(yamux::type::window_update, yamux::flag_syn, sid, 0); };
  const auto data = [](std::uint32_t sid, const std::string& d) {
    return yamux_frame(yamux::type::data, 0, sid, d.size(), d);
  };
  CHECK(b.up(bytes({0x00, 0x01}) + syn(1) + syn(3), ev, client).empty());
  client.clear();
  // Stream 3's 128 KiB are refused (unknown address type) behind stream 1's open: credited once that is taken.
  const std::string bad = bytes({0x00, 0x00, 0x09}) + std::string((128u << 10) - 3, 'y');
  CHECK(b.up(data(1, tcp_request) + data(3, bad), ev, client).empty());
  CHECK(count(ev, kind::open) == 1);
  REQUIRE(ev.back().kind == kind::credit);
  CHECK(ev.back().stream == 3);
  CHECK(ev.back().bytes == (128u << 10));
  const std::string update3 = yamux_frame(yamux::type::window_update, 0, 3, 128u << 10);
  CHECK(client.find(update3) == std::string::npos);
  take(b, ev, client);
  CHECK(client.find(update3) != std::string::npos);
  // With no event waiting, stream 5's are credited at once.
  client.clear();
  CHECK(b.up(syn(5) + data(5, bad), ev, client).empty());
  CHECK(ev.empty());
  CHECK(client.find(yamux_frame(yamux::type::window_update, 0, 5, 128u << 10)) != std::string::npos);
}

TEST_CASE("sing-mux framing: a duplicate yamux open and a bad frame end the session", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  const std::string syn = yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0);
  CHECK(b.up(bytes({0x00, 0x01}) + syn, ev, client).empty());
  CHECK(b.up(syn, ev, client) == "duplicate_stream");
  sing_mux::framing c(4);
  CHECK(c.up(bytes({0x00, 0x00}) + bytes({0x07, 0x00}), ev, client) == "bad_version");
  sing_mux::framing d(4);
  CHECK(d.up(bytes({0x00, 0x02}), ev, client) == "h2mux_unsupported");
  sing_mux::framing e(4);
  CHECK(e.up(bytes({0x05, 0x00}), ev, client) == "unknown_version");
}

TEST_CASE("sing-mux framing: a stream flood past the limit is refused stream by stream", "[sing_mux]") {
  sing_mux::framing b(2);
  sing_mux::sub_events ev;
  std::string client;
  std::string in = bytes({0x00, 0x00});
  for (std::uint32_t sid = 1; sid <= 7; sid += 2) in += smux_frame(0, sid) + smux_frame(2, sid, tcp_request);
  CHECK(b.up(in, ev, client).empty());
  CHECK(count(ev, kind::open) == 2);  // two opens; streams 5 and 7 refused
  CHECK(b.refused() == 2);
  const auto r = b.take_refusals();
  REQUIRE(r.size() == 2);
  CHECK(r[0].stream == 5);
  CHECK(r[0].reason == "too_many_streams");
  CHECK(b.live() == 2);
}

TEST_CASE("sing-mux framing: refused streams are remembered for their close, the latest 4096 only", "[sing_mux]") {
  sing_mux::framing b(1);
  sing_mux::sub_events ev;
  std::string client;
  const auto syn = [](std::uint32_t sid) { return yamux_frame(yamux::type::window_update, yamux::flag_syn, sid, 0); };
  std::string in = bytes({0x00, 0x01}) + syn(1) + syn(3);  // 1 live, 3 refused
  CHECK(b.up(in, ev, client).empty());
  CHECK(b.up(syn(3), ev, client) == "duplicate_stream");  // still known: a SYN for it again ends the session
  sing_mux::framing c(1);
  in = bytes({0x00, 0x01}) + syn(1) + syn(3);
  for (std::uint32_t sid = 5; sid < 5 + 2 * 4096; sid += 2) in += syn(sid);
  CHECK(c.up(in, ev, client).empty());
  CHECK(c.refused() == 4097);
  // 4096 refused after it: stream 3 is forgotten, its id opens (and is refused) again.
  CHECK(c.up(syn(3), ev, client).empty());
  CHECK(c.refused() == 4098);
}

TEST_CASE("sing-mux framing: bytes on a refused stream are credited at once", "[sing_mux]") {
  sing_mux::framing b(1);
  sing_mux::sub_events ev;
  std::string client;
  std::string in = bytes({0x00, 0x01}) + yamux_frame(yamux::type::window_update, yamux::flag_syn, 1, 0) +
                   yamux_frame(yamux::type::window_update, yamux::flag_syn, 3, 0);
  CHECK(b.up(in, ev, client).empty());
  client.clear();
  const std::string half(128u << 10, 'x');
  CHECK(b.up(yamux_frame(yamux::type::data, 0, 3, half.size(), half), ev, client).empty());
  CHECK(ev.empty());  // nothing for the engine, and no credit event needed for the window to come back
  CHECK(client == yamux_frame(yamux::type::window_update, 0, 3, 128u << 10));
}

TEST_CASE("sing-mux framing: bad stream requests are refused with their reason", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 1) + smux_frame(2, 1, bytes({0x00, 0x09})), ev, client).empty());
  CHECK(b.up(smux_frame(0, 3) + smux_frame(2, 3, bytes({0x00, 0x00, 0x01, 1, 2, 3, 4, 0, 0})), ev, client).empty());
  CHECK(ev.empty());
  const auto r = b.take_refusals();
  REQUIRE(r.size() == 2);
  CHECK(r[0].reason == "unknown_flags");
  CHECK(r[1].reason == "port_zero");
  CHECK(b.live() == 0);
}

TEST_CASE("sing-mux framing: UDP per-packet addresses open with the first packet's destination", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  const std::string req = bytes({0x00, 0x03, 0x03, 20}) + "sp.mux.sing-box.arpa" + bytes({0x01, 0xbc});
  const std::string pkt1 = bytes({0x01, 127, 0, 0, 1, 0x13, 0x89, 0x00, 0x02}) + "p1";
  const std::string pkt2 = bytes({0x01, 127, 0, 0, 1, 0x13, 0x8a, 0x00, 0x02}) + "p2";
  CHECK(b.up(bytes({0x00, 0x00}) + smux_frame(0, 1) + smux_frame(2, 1, req + pkt1 + pkt2.substr(0, 4)), ev, client)
            .empty());
  REQUIRE(count(ev, kind::open) == 1);
  CHECK(ev[0].kind == kind::open);
  CHECK(format_destination(*ev[0].dest) == "127.0.0.1:5001");
  CHECK(ev[0].dest->net == network::udp);
  CHECK(ev[0].data == "p1");
  const auto id = ev[0].id;
  ev.clear();
  CHECK(b.up(smux_frame(2, 1, pkt2.substr(4)), ev, client).empty());
  REQUIRE(count(ev, kind::data) == 1);
  CHECK(ev[0].kind == kind::data);
  CHECK(ev[0].data == "p2");
  CHECK(format_destination(*ev[0].dest) == "127.0.0.1:5002");
  // A reply without a source names the first packet's; one with its own carries it.
  b.send(id, "r1", nullptr, client);
  CHECK(client == smux_frame(2, 1, "\0"s + bytes({0x01, 127, 0, 0, 1, 0x13, 0x89, 0x00, 0x02}) + "r1"));
}

TEST_CASE("sing-mux framing: padding of the first records both ways", "[sing_mux]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  std::string in = sing_mux::encode_request({1, sing_mux::protocol::smux, true}, 5);
  sing_mux::encode_padded_record(in, smux_frame(0, 1), 300);
  sing_mux::encode_padded_record(in, smux_frame(2, 1, tcp_request + "x"), 256);
  CHECK(b.up(in, ev, client).empty());
  REQUIRE(count(ev, kind::open) == 1);
  CHECK(ev[0].data == "x");
  CHECK(b.sealing());
  const std::string sealed = b.seal("abc");
  REQUIRE(sealed.size() >= 4 + 3 + 256);
  CHECK(sealed.substr(0, 2) == bytes({0x00, 0x03}));
  CHECK(sealed.substr(4, 3) == "abc");
}
