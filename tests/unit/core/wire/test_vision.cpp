// core/wire/vision: XTLS Vision's padding frames byte for byte (UUID once · command · content
// length · padding length · content · padding) and the detection of a TLS handshake inside, from
// the format as Xray, sing-box and mihomo write it.
#include <catch2/catch.hpp>

#include <string>

#include "core/wire/vision.hpp"

using namespace vlessbench;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += static_cast<char>(x);
  return s;
}

const uuid_bytes user{0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x41, 0x72, 0x83, 0x94, 0xa5, 0xb6, 0xc7, 0xd8, 0xe9, 0xfa};
std::string uuid_text() { return std::string(reinterpret_cast<const char*>(user.data()), user.size()); }

struct fed {
  std::string content;
  std::string_view error;
};

fed feed_all(vision::unpadder& u, const std::string& in, std::size_t step = 0) {
  fed f;
  std::string buf = in;
  for (std::size_t i = 0; i < buf.size();) {
    const std::size_t k = step == 0 ? buf.size() - i : std::min(step, buf.size() - i);
    const auto r = u.feed(buf.data() + i, k, buf.data() + i);
    f.content.append(buf.data() + i, r.out);
    if (!r.error.empty()) {
      f.error = r.error;
      return f;
    }
    i += k;
  }
  return f;
}

// A TLS ServerHello record: version 3.3, random, a 32-byte session id, the cipher, and (for TLS
// 1.3) supported_versions = 0x0304.
std::string server_hello(std::uint16_t cipher, bool tls13) {
  std::string body = bytes({0x03, 0x03}) + std::string(32, '\x11') + bytes({32}) + std::string(32, '\x22') +
                     bytes({cipher >> 8, cipher & 0xff, 0x00});
  const std::string ext = tls13 ? bytes({0x00, 0x2b, 0x00, 0x02, 0x03, 0x04}) : bytes({0xff, 0x01, 0x00, 0x01, 0x00});
  body += bytes({0x00, static_cast<int>(ext.size())}) + ext;
  const std::string hs =
      bytes({0x02, 0x00, static_cast<int>(body.size() >> 8), static_cast<int>(body.size() & 0xff)}) + body;
  return bytes({0x16, 0x03, 0x03, static_cast<int>(hs.size() >> 8), static_cast<int>(hs.size() & 0xff)}) + hs;
}

}  // namespace

TEST_CASE("vision unpadder: the UUID once, then continue and end frames, plain after end", "[vision]") {
  const std::string in = uuid_text() + bytes({0x00, 0x00, 0x03, 0x00, 0x02}) + "abc" + bytes({0, 0}) +
                         bytes({0x01, 0x00, 0x02, 0x00, 0x00}) + "de" + "fg";
  vision::unpadder u(user);
  const auto whole = feed_all(u, in);
  CHECK(whole.error.empty());
  CHECK(whole.content == "abcdefg");
  CHECK(u.where() == vision::unpadder::state::plain);
  CHECK(u.frames() == 2);
  CHECK(u.padding_bytes() == 16 + 5 + 2 + 5);
  vision::unpadder one(user);  // byte by byte: the same content and state
  const auto single = feed_all(one, in, 1);
  CHECK(single.content == "abcdefg");
  CHECK(one.where() == vision::unpadder::state::plain);
}

TEST_CASE("vision unpadder: a direct frame switches to direct, and bytes after it pass as they are", "[vision]") {
  const std::string in = uuid_text() + bytes({0x02, 0x00, 0x01, 0x00, 0x01}) + "x" + bytes({0}) + "raw";
  vision::unpadder u(user);
  const auto f = feed_all(u, in);
  CHECK(f.error.empty());
  CHECK(f.content == "xraw");
  CHECK(u.direct());
  CHECK_FALSE(u.padded());
}

TEST_CASE("vision unpadder: an empty last frame takes effect with its header", "[vision]") {
  // Empty content, no padding: nothing follows the header, so the command applies at once; the
  // next byte is already the stream itself (raw TCP after direct), never read as a frame.
  SECTION("empty direct after the UUID and a continue frame") {
    const std::string in = uuid_text() + bytes({0x00, 0x00, 0x01, 0x00, 0x00}) + "a" + bytes({0x02, 0, 0, 0, 0});
    for (std::size_t step : {std::size_t{0}, std::size_t{1}}) {
      vision::unpadder u(user);
      const auto f = feed_all(u, in, step);
      CHECK(f.error.empty());
      CHECK(f.content == "a");
      CHECK(u.direct());
      CHECK(u.frames() == 2);
    }
  }
  SECTION("empty end") {
    vision::unpadder u(user);
    const auto f = feed_all(u, uuid_text() + bytes({0x01, 0, 0, 0, 0}));
    CHECK(f.error.empty());
    CHECK(f.content.empty());
    CHECK(u.where() == vision::unpadder::state::plain);
  }
  SECTION("empty continue waits for the next header") {
    vision::unpadder u(user);
    CHECK(feed_all(u, uuid_text() + bytes({0x00, 0, 0, 0, 0})).error.empty());
    CHECK(u.where() == vision::unpadder::state::header);
  }
  SECTION("empty content with padding applies after the padding") {
    vision::unpadder u(user);
    CHECK(feed_all(u, uuid_text() + bytes({0x02, 0, 0, 0, 2, 0})).error.empty());
    CHECK(u.where() == vision::unpadder::state::padding);
    CHECK(feed_all(u, bytes({0}) + "raw").content == "raw");
    CHECK(u.direct());
  }
}

TEST_CASE("vision unpadder: hostile frames are refused with a reason", "[vision]") {
  SECTION("another user's UUID") {
    vision::unpadder u(user);
    std::string other = uuid_text();
    other[15] ^= 1;
    CHECK(feed_all(u, other + bytes({0, 0, 0, 0, 0})).error == "vision_bad_uuid");
  }
  SECTION("no UUID at all: an unpadded stream") {
    vision::unpadder u(user);
    CHECK(feed_all(u, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").error == "vision_bad_uuid");
  }
  SECTION("an unknown command") {
    vision::unpadder u(user);
    CHECK(feed_all(u, uuid_text() + bytes({0x03, 0, 0, 0, 0})).error == "vision_bad_command");
  }
  SECTION("padding longer than any sender pads") {
    vision::unpadder u(user);
    CHECK(feed_all(u, uuid_text() + bytes({0x00, 0x00, 0x00, 0x1f, 0xec})).error == "vision_bad_padding");
    vision::unpadder ok(user);  // 8171, the most Xray pads, passes
    CHECK(feed_all(ok, uuid_text() + bytes({0x00, 0x00, 0x00, 0x1f, 0xeb})).error.empty());
  }
  SECTION("a padded part that never ends") {
    vision::unpadder u(user);
    std::string in = uuid_text();
    for (std::size_t i = 0; i <= vision::max_padded_frames; ++i) in += bytes({0, 0, 0, 0, 0});
    CHECK(feed_all(u, in).error == "vision_padding_unended");
  }
  SECTION("after a failure nothing more is taken") {
    vision::unpadder u(user);
    CHECK(feed_all(u, uuid_text() + bytes({0x07, 0, 0, 0, 0})).error == "vision_bad_command");
    CHECK(feed_all(u, "more").error == "vision_failed");
  }
}

TEST_CASE("vision tls filter: a TLS 1.3 ServerHello allows direct copy, CCM_8 and TLS 1.2 do not", "[vision]") {
  vision::tls_filter f;
  f.observe(bytes({0x16, 0x03, 0x01, 0x00, 0x10, 0x01}) + std::string(16, '\0'));  // a ClientHello
  CHECK(f.is_tls);
  CHECK_FALSE(f.tls12_or_above);
  f.observe(server_hello(0x1301, true));
  CHECK(f.tls13);
  CHECK(f.cipher == 0x1301);
  CHECK(f.direct_ok);
  CHECK_FALSE(f.filtering());

  vision::tls_filter ccm8;
  ccm8.observe(server_hello(0x1305, true));
  CHECK(ccm8.tls13);
  CHECK_FALSE(ccm8.direct_ok);

  vision::tls_filter old;
  old.observe(server_hello(0xc02f, false));
  CHECK(old.tls12_or_above);
  CHECK_FALSE(old.tls13);
  CHECK_FALSE(old.direct_ok);
  CHECK_FALSE(old.filtering());  // decided: TLS 1.2
}

TEST_CASE("vision tls filter: a ServerHello with a session id past its end reads no cipher", "[vision]") {
  std::string sh = server_hello(0x1301, true);
  sh[43] = static_cast<char>(0xff);
  vision::tls_filter f;
  f.observe(sh);
  CHECK(f.cipher == 0);
  CHECK_FALSE(f.direct_ok);
}

TEST_CASE("vision padder: plain traffic is padded for the detection's packets, then ends", "[vision]") {
  vision::tls_filter f;
  vision::padder p(user, 7);
  std::string wire;
  std::string sent;
  for (int i = 0; i < 10; ++i) {
    const std::string w = "write " + std::to_string(i);
    sent += w;
    CHECK_FALSE(p.pad(f, w, wire).direct);
  }
  CHECK_FALSE(p.padding());
  vision::unpadder u(user);
  const auto back = feed_all(u, wire);
  CHECK(back.error.empty());
  CHECK(back.content == sent);
  CHECK(u.where() == vision::unpadder::state::plain);
  CHECK(u.frames() == 7);  // the seventh write ends the padding, a packet early as Xray does
  CHECK(wire.substr(0, 16) == uuid_text());
}

TEST_CASE("vision padder: inner TLS 1.3 ends with direct on the first application data", "[vision]") {
  vision::tls_filter f;
  vision::padder p(user, 1);
  std::string wire;
  f.observe(bytes({0x16, 0x03, 0x01, 0x00, 0x10, 0x01}) + std::string(16, '\0'));  // the client's hello went up
  const std::string hello = server_hello(0x1302, true);
  CHECK_FALSE(p.pad(f, hello, wire).direct);
  CHECK(p.padding());
  const std::string app = bytes({0x17, 0x03, 0x03, 0x00, 0x04}) + "abcd";
  CHECK(p.pad(f, app, wire).direct);
  CHECK_FALSE(p.padding());
  vision::unpadder u(user);
  const auto back = feed_all(u, wire + "raw");
  CHECK(back.content == hello + app + "raw");
  CHECK(u.direct());
}

TEST_CASE("vision padder: a long write is cut into frames that fit an 8 KiB buffer", "[vision]") {
  vision::tls_filter f;
  f.packets_left = 0;
  f.tls12_or_above = true;  // keeps padding (a TLS 1.2 handshake in progress)
  vision::padder p(user, 3);
  std::string wire;
  const std::string big(20000, 'b');
  p.pad(f, big, wire);
  vision::unpadder u(user);
  const auto back = feed_all(u, wire, 1000);
  CHECK(back.content == big);
  CHECK(u.frames() == 3);
  CHECK(u.padded());
}

TEST_CASE("vision padder: an empty write is one long-padded empty frame", "[vision]") {
  vision::tls_filter f;
  vision::padder p(user, 5);
  std::string wire;
  p.pad(f, {}, wire);
  REQUIRE(wire.size() >= 16 + 5 + 900);
  CHECK(wire[16] == 0);
  CHECK(wire[17] == 0);
  CHECK(wire[18] == 0);
  vision::unpadder u(user);
  CHECK(feed_all(u, wire).content.empty());
  CHECK(u.padded());
}
