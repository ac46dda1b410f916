// The XHTTP listener's HTTP/2 driver (server/transport/xhttp_h2.hpp) over bytes: HTTP/2 frames
// written by hand, what it opens, refuses and answers, and its windows.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "server/transport/xhttp_h2.hpp"

using namespace vlessbench;

namespace {

const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const std::string padding = "x_padding=" + std::string(100, 'X');

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

// HPACK: :method (GET 0x82, POST 0x83), :scheme http, :path and :authority as literals without
// indexing (path under 127 bytes).
std::string request(bool post, const std::string& path) {
  std::string b;
  b += post ? '\x83' : '\x82';
  b += '\x86';
  b += '\x04';
  b += static_cast<char>(path.size());
  b += path;
  b += "\x01\x01h";
  return b;
}

struct frame {
  int type, flags;
  std::uint32_t sid;
  std::string payload;
};

std::vector<frame> drain(xhttp::h2_server& s) {
  std::string out;
  for (auto o = s.next_output(); !o.empty(); o = s.next_output()) out.append(o);
  std::vector<frame> f;
  for (std::size_t at = 0; at + 9 <= out.size();) {
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(out[at + i]); };
    const std::size_t n = (b(0) << 16) | (b(1) << 8) | b(2);
    REQUIRE(at + 9 + n <= out.size());
    f.push_back({b(3), b(4), ((b(5) & 0x7fu) << 24) | (b(6) << 16) | (b(7) << 8) | b(8), out.substr(at + 9, n)});
    at += 9 + n;
  }
  return f;
}

// The first byte of a response HEADERS block: nghttp2 sends :status 200 as static index 8
// (0x88), 400 as 12 (0x8c), 404 as 13 (0x8d); 413 is a literal.
int status_byte(const std::vector<frame>& f, std::uint32_t sid) {
  for (const auto& x : f)
    if (x.type == 1 && x.sid == sid) return static_cast<unsigned char>(x.payload[0]);
  return -1;
}

bool window_update(const std::vector<frame>& f, std::uint32_t sid) {
  for (const auto& x : f)
    if (x.type == 8 && x.sid == sid) return true;
  return false;
}

transport_spec spec() {
  transport_spec t;
  t.kind = transport_kind::xhttp;
  t.path = "/xh";
  return t;
}

}  // namespace

TEST_CASE("xhttp h2: a packet POST is opened with its seq and its body, a bad one refused with a reason") {
  const auto t = spec();
  xhttp::h2_server s(t, xhttp::h2_limits_for(t));
  std::string in = preface + h2(4, 0, 0);
  in += h2(1, 4, 1, request(true, "/xh/s1/7?" + padding)) + h2(0, 1, 1, "abc");
  in += h2(1, 5, 3, request(false, "/xh/s1?x_padding=XX"));
  in += h2(1, 5, 5, request(true, "/other/s1/0?" + padding));
  REQUIRE(s.feed(in.data(), in.size()));
  const auto opened = s.take_opened();
  REQUIRE(opened.size() == 1);
  CHECK(opened[0]->target.kind == xhttp::request_kind::packet);
  CHECK(opened[0]->target.session == "s1");
  CHECK(opened[0]->target.seq == 7);
  CHECK(opened[0]->in == "abc");
  CHECK(opened[0]->peer_ended);
  const auto rejected = s.take_rejected();
  REQUIRE(rejected.size() == 2);
  CHECK(rejected[0].reason == "xhttp_padding");
  CHECK(rejected[1].reason == "wrong_path");
  const auto out = drain(s);
  CHECK(status_byte(out, 3) == 0x8c);
  CHECK(status_byte(out, 5) == 0x8d);
  // The packet's window is raised to max_post_bytes (its body is taken whole).
  CHECK(window_update(out, 1));
  s.answer(*opened[0], 200);
  CHECK(status_byte(drain(s), 1) == 0x88);
}

TEST_CASE("xhttp h2: a packet over max_post_bytes is marked too large") {
  auto t = spec();
  t.max_post_bytes = 20000;
  xhttp::h2_server s(t, xhttp::h2_limits_for(t));
  std::string in = preface + h2(4, 0, 0) + h2(1, 4, 1, request(true, "/xh/s1/0?" + padding));
  in += h2(0, 0, 1, std::string(16000, 'a')) + h2(0, 1, 1, std::string(8000, 'b'));
  REQUIRE(s.feed(in.data(), in.size()));
  const auto opened = s.take_opened();
  REQUIRE(opened.size() == 1);
  CHECK(opened[0]->too_large);
  CHECK(opened[0]->in.empty());
}

TEST_CASE("xhttp h2: a stream-one window opens only as its body is taken, its answer streams") {
  const auto t = spec();
  xhttp::h2_server s(t, xhttp::h2_limits_for(t));
  // The SETTINGS ack: the server's 256 KiB stream window applies from here.
  std::string in = preface + h2(4, 0, 0) + h2(4, 1, 0) + h2(1, 4, 1, request(true, "/xh/?" + padding));
  for (int i = 0; i < 13; ++i) in += h2(0, 0, 1, std::string(16000, 'v'));
  REQUIRE(s.feed(in.data(), in.size()));
  const auto opened = s.take_opened();
  REQUIRE(opened.size() == 1);
  auto& r = *opened[0];
  CHECK(r.target.kind == xhttp::request_kind::stream_one);
  CHECK(r.in.size() == 208000);
  s.answer_stream(r, true);
  auto out = drain(s);
  CHECK(status_byte(out, 1) == 0x88);
  CHECK_FALSE(window_update(out, 1));  // nothing taken yet
  // nghttp2 sends the WINDOW_UPDATE once half the window is taken.
  s.consume(r, 208000);
  CHECK(r.in.empty());
  CHECK(window_update(drain(s), 1));
  s.send(r, "down", 4);
  s.finish(r);
  out = drain(s);
  std::string body;
  bool ended = false;
  for (const auto& f : out)
    if (f.type == 0 && f.sid == 1) {
      body += f.payload;
      ended = ended || (f.flags & 1) != 0;
    }
  CHECK(body == "down");
  CHECK(ended);
}
