// sing-mux's h2mux through the sing-mux framing (server/sing_mux_framing.hpp) on the server's nghttp2 driver
// in its CONNECT mode (server/sing_mux_h2.hpp, server/transport/grpc_h2.hpp): HTTP/2 frames written by hand
// as Go's HTTP/2 client sends them for sing-mux (a CONNECT to localhost per stream), what the engine gets,
// what the client gets back, windows, refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bytes.hpp"
#include "server/sing_mux_framing.hpp"
#include "server/sing_mux_h2.hpp"

using namespace vlessbench;
using namespace std::string_literals;
using vlessbench::test::bytes;

namespace {

const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// HPACK literals without indexing, static-table names: :method CONNECT, :authority localhost.
const std::string connect_fields =
    "\x02\x07"
    "CONNECT"
    "\x01\x09"
    "localhost";
const std::string get_fields =
    "\x82\x84\x87\x01\x09"
    "localhost";
const std::string tcp_request = bytes({0x00, 0x00, 0x01, 127, 0, 0, 1, 0x1f, 0x90});

std::string h2(int type, int flags, std::uint32_t sid, const std::string& payload = {}) {
  std::string f;
  const std::size_t n = payload.size();
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int s = 24; s >= 0; s -= 8) f += static_cast<char>((sid >> s) & 0xff);
  return f + payload;
}

struct h2_frame {
  int type, flags;
  std::uint32_t sid;
  std::string payload;
};

std::vector<h2_frame> parse(const std::string& in) {
  std::vector<h2_frame> out;
  for (std::size_t at = 0; at + 9 <= in.size();) {
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(in[at + i]); };
    const std::size_t n = (b(0) << 16) | (b(1) << 8) | b(2);
    REQUIRE(at + 9 + n <= in.size());
    out.push_back({b(3), b(4), ((b(5) & 0x7fu) << 24) | (b(6) << 16) | (b(7) << 8) | b(8), in.substr(at + 9, n)});
    at += 9 + n;
  }
  return out;
}

std::string data_of(const std::vector<h2_frame>& f, std::uint32_t sid, bool* ended = nullptr) {
  std::string out;
  for (const auto& x : f)
    if (x.type == 0 && x.sid == sid) {
      out += x.payload;
      if (ended != nullptr && (x.flags & 1) != 0) *ended = true;
    }
  return out;
}

using kind = sing_mux::sub_event::kind_t;

// The first open among the events.
const sing_mux::sub_event& first_open(const sing_mux::sub_events& ev) {
  for (const auto& e : ev)
    if (e.kind == kind::open) return e;
  FAIL("no open event");
  return ev.front();
}

// The engine takes every event: credits applied, the rest dropped.
void take(sing_mux::framing& b, sing_mux::sub_events& ev, std::string& client) {
  for (const auto& e : ev)
    if (e.kind == kind::credit) b.consumed(e.stream, e.bytes, client);
  ev.clear();
}

sing_mux::framing h2_framing(std::size_t max) {
  return sing_mux::framing(
      max, 1, [max] { return std::make_unique<vless_server::sing_mux_h2>(static_cast<std::uint32_t>(max)); });
}

const std::string opening = bytes({0x00, 0x02}) + preface + h2(4, 0, 0) + h2(4, 1, 0);

}  // namespace

TEST_CASE("h2mux: a CONNECT stream opens a sub, answered 200, its end an END_STREAM", "[sing_mux_h2]") {
  auto b = h2_framing(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(opening + h2(1, 4, 1, connect_fields) + h2(0, 0, 1, tcp_request + "GET /"), ev, client).empty());
  CHECK(b.windowed());
  const auto& o = first_open(ev);
  CHECK(format_destination(*o.dest) == "127.0.0.1:8080");
  CHECK(o.data == "GET /");
  const auto id = o.id;
  auto out = parse(client);
  REQUIRE(!out.empty());
  CHECK(out[0].type == 4);  // our SETTINGS first
  CHECK(std::any_of(out.begin(), out.end(), [](const h2_frame& x) { return x.type == 1 && x.sid == 1; }));
  client.clear();
  ev.clear();
  b.send(id, "HTTP", nullptr, client);
  b.send(id, "/1.1", nullptr, client);
  bool ended = false;
  CHECK(data_of(parse(client), 1, &ended) == "\0HTTP/1.1"s);
  CHECK(!ended);
  client.clear();
  CHECK(b.up(h2(0, 1, 1), ev, client).empty());  // the client's END_STREAM: the sub's end
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == kind::end);
  CHECK(ev[0].id == id);
  b.closed(id, false, client);
  CHECK(data_of(parse(client), 1, &ended).empty());
  CHECK(ended);
  CHECK(b.live() == 0);
}

TEST_CASE("h2mux: the client's window opens only as the engine takes its bytes", "[sing_mux_h2]") {
  auto b = h2_framing(4);
  sing_mux::sub_events ev;
  std::string client;
  const std::string big(200 * 1024, 'x');  // within the 256 KiB stream window, past half of it
  std::string up = opening + h2(1, 4, 1, connect_fields) + h2(0, 0, 1, tcp_request);
  for (std::size_t off = 0; off < big.size(); off += 16384) up += h2(0, 0, 1, big.substr(off, 16384));
  CHECK(b.up(up, ev, client).empty());
  const auto updates = [](const std::string& c, std::uint32_t sid) {
    int n = 0;
    for (const auto& x : parse(c)) n += x.type == 8 && x.sid == sid ? 1 : 0;
    return n;
  };
  CHECK(updates(client, 1) == 0);
  client.clear();
  take(b, ev, client);
  CHECK(updates(client, 1) == 1);
  CHECK(updates(client, 0) == 0);  // the connection window (1 MiB) is not half used yet
}

TEST_CASE("h2mux: what the client's window does not take is held, and released by its WINDOW_UPDATE", "[sing_mux_h2]") {
  auto b = h2_framing(4);
  sing_mux::sub_events ev;
  std::string client;
  // SETTINGS_INITIAL_WINDOW_SIZE 1000 from the client.
  const std::string small_window = h2(4, 0, 0, bytes({0x00, 0x04, 0, 0, 0x03, 0xe8}));
  CHECK(b.up(bytes({0x00, 0x02}) + preface + small_window + h2(4, 1, 0) + h2(1, 4, 1, connect_fields) +
                 h2(0, 0, 1, tcp_request),
             ev, client)
            .empty());
  const auto id = first_open(ev).id;
  client.clear();
  b.send(id, std::string(5000, 'y'), nullptr, client);
  CHECK(data_of(parse(client), 1).size() == 1000);
  CHECK(b.held() == 4001);  // the status byte and 5000, less 1000
  client.clear();
  CHECK(b.up(h2(8, 0, 1, bytes({0, 0, 0x27, 0x10})), ev, client).empty());  // +10000
  CHECK(data_of(parse(client), 1).size() == 4001);
  CHECK(b.held() == 0);
}

TEST_CASE("h2mux: a GET, a stream without a valid destination and a bad preface are refused with reasons",
          "[sing_mux_h2]") {
  auto b = h2_framing(4);
  sing_mux::sub_events ev;
  std::string client;
  const std::string bad = bytes({0x00, 0x00, 0x09, 0, 0, 0, 0, 0, 0});
  CHECK(b.up(opening + h2(1, 5, 1, get_fields) + h2(1, 4, 3, connect_fields) + h2(0, 0, 3, bad), ev, client).empty());
  CHECK(ev.empty());
  const auto refusals = b.take_refusals();
  REQUIRE(refusals.size() == 2);
  CHECK(refusals[0].stream == 3);
  CHECK(refusals[0].reason == "unknown_address_type");
  CHECK(refusals[1].stream == 1);
  CHECK(refusals[1].reason == "h2mux_not_connect");
  CHECK(refusals[1].note == "GET");
  bool ended = false;
  const std::string answer = data_of(parse(client), 3, &ended);
  CHECK(answer.substr(0, 2) == "\x01\x14"s);  // status 1, the reason's length
  CHECK(answer.substr(2) == "unknown_address_type");
  CHECK(ended);
  CHECK(b.refused() == 2);

  auto c = h2_framing(4);
  ev.clear();
  client.clear();
  CHECK(c.up(bytes({0x00, 0x02}) + "GET / HTTP/1.1\r\n\r\n", ev, client) == "h2_bad_preface");
}

TEST_CASE("h2mux: without an HTTP/2 driver the framing refuses h2mux by name", "[sing_mux_h2]") {
  sing_mux::framing b(4);
  sing_mux::sub_events ev;
  std::string client;
  CHECK(b.up(bytes({0x00, 0x02}) + preface, ev, client) == "h2mux_unsupported");
}

TEST_CASE("h2mux: streams closed by RST_STREAM after an answer keep the connection, resets before one end it",
          "[sing_mux_h2]") {
  // Go's HTTP/2 client closes every stream with RST_STREAM CANCEL; the rapid reset resets before any answer.
  // 300 of each: past the burst of 200 (grpc::h2_limits reset_burst).
  const auto run = [](bool answered) {
    auto b = h2_framing(4);
    sing_mux::sub_events ev;
    std::string client;
    REQUIRE(b.up(opening, ev, client).empty());
    for (std::uint32_t sid = 1; sid < 600; sid += 2) {
      ev.clear();
      const std::string_view e = b.up(h2(1, 4, sid, connect_fields) + h2(0, 0, sid, tcp_request), ev, client);
      if (!e.empty()) return std::string(e);
      if (answered) b.send(first_open(ev).id, "ok", nullptr, client);
      ev.clear();
      const std::string_view r = b.up(h2(3, 0, sid, bytes({0, 0, 0, 8})), ev, client);
      if (!r.empty()) return std::string(r);
      for (const auto& x : ev)
        if (x.kind == kind::end) b.closed(x.id, false, client);
    }
    return std::string();
  };
  CHECK(run(true).empty());
  CHECK(run(false) == "h2_goaway_sent: ENHANCE_YOUR_CALM");
}
