#include <catch2/catch.hpp>

#include <string>

#include "core/wire/http_parser.hpp"
#include "core/wire/transport_spec.hpp"
#include "core/wire/xhttp_request.hpp"

using namespace vlessbench;
using namespace vlessbench::xhttp;

namespace {

const std::string pad(std::size_t n) { return "x_padding=" + std::string(n, 'X'); }
const std::string referer(std::size_t n) { return "https://example.com/x/abc?" + pad(n); }

std::string reason_of(std::string_view method, std::string_view target, std::optional<std::string_view> ref,
                      const rules& r) {
  const auto c = classify(method, target, ref, r);
  return c.invalid() ? std::string(c.reason) : "(" + std::string(to_string(c.value.kind)) + ")";
}

}  // namespace

TEST_CASE("xhttp classify: the three modes' requests", "[xhttp]") {
  const rules r{"/x/"};
  const std::string ref = referer(200);
  auto c = classify("POST", "/x/", ref, r);
  REQUIRE(c.complete());
  CHECK(c.value.kind == request_kind::stream_one);
  CHECK(c.value.session.empty());
  CHECK(c.value.padding == 200);

  c = classify("GET", "/x/6b1a2c3d-0000-4000-8000-000000000001", ref, r);
  REQUIRE(c.complete());
  CHECK(c.value.kind == request_kind::download);
  CHECK(c.value.session == "6b1a2c3d-0000-4000-8000-000000000001");

  c = classify("POST", "/x/abc", ref, r);
  REQUIRE(c.complete());
  CHECK(c.value.kind == request_kind::stream_up);

  c = classify("POST", "/x/abc/17", ref, r);
  REQUIRE(c.complete());
  CHECK(c.value.kind == request_kind::packet);
  CHECK(c.value.seq == 17);

  // Without a Referer, the URL's own query carries the padding.
  c = classify("GET", "/x/abc?" + pad(100), std::nullopt, r);
  REQUIRE(c.complete());
  CHECK(c.value.padding == 100);
}

TEST_CASE("xhttp classify: refusals name their reason", "[xhttp]") {
  const rules r{"/x/"};
  const std::string ref = referer(500);
  CHECK(reason_of("GET", "/y/abc", ref, r) == "wrong_path");
  CHECK(reason_of("GET", "/x", ref, r) == "wrong_path");
  CHECK(reason_of("PUT", "/x/abc", ref, r) == "wrong_method");
  CHECK(reason_of("GET", "/x/", ref, r) == "wrong_method");  // a download needs a session
  CHECK(reason_of("GET", "/x/abc/1", ref, r) == "wrong_path");
  CHECK(reason_of("POST", "/x/abc/1/2", ref, r) == "wrong_path");
  CHECK(reason_of("POST", "/x/a%2Fb", ref, r) == "xhttp_bad_session");
  CHECK(reason_of("POST", "/x/" + std::string(65, 'a'), ref, r) == "xhttp_bad_session");
  CHECK(reason_of("POST", "/x/abc/-1", ref, r) == "xhttp_bad_seq");
  CHECK(reason_of("POST", "/x/abc/18446744073709551616", ref, r) == "xhttp_bad_seq");  // 2^64
  CHECK(reason_of("POST", "/x/abc/18446744073709551615", ref, r) == "(packet)");
  CHECK(reason_of("POST", "/x/abc/", ref, r) == "xhttp_bad_seq");
  // Padding: 99 and 1001 are out of the default range, 100 and 1000 in; a missing one is 0.
  CHECK(reason_of("GET", "/x/abc", referer(99), r) == "xhttp_padding");
  CHECK(reason_of("GET", "/x/abc", referer(1001), r) == "xhttp_padding");
  CHECK(reason_of("GET", "/x/abc", referer(100), r) == "(download)");
  CHECK(reason_of("GET", "/x/abc", referer(1000), r) == "(download)");
  CHECK(reason_of("GET", "/x/abc", std::nullopt, r) == "xhttp_padding");
  // A Referer is read for padding even when the URL has some (as Xray's server does).
  CHECK(reason_of("GET", "/x/abc?" + pad(200), "https://h/x/", r) == "xhttp_padding");
}

TEST_CASE("xhttp classify: a listener's mode refuses the others' requests", "[xhttp]") {
  const std::string ref = referer(300);
  const rules packet{"/", mode::packet_up};
  CHECK(reason_of("POST", "/s/1", ref, packet) == "(packet)");
  CHECK(reason_of("GET", "/s", ref, packet) == "(download)");
  CHECK(reason_of("POST", "/s", ref, packet) == "xhttp_mode");
  CHECK(reason_of("POST", "/", ref, packet) == "xhttp_mode");
  const rules one{"/", mode::stream_one};
  CHECK(reason_of("POST", "/", ref, one) == "(stream-one)");
  CHECK(reason_of("GET", "/s", ref, one) == "xhttp_mode");
  const rules up{"/", mode::stream_up};
  CHECK(reason_of("POST", "/s", ref, up) == "(stream-up)");
  CHECK(reason_of("POST", "/s/0", ref, up) == "xhttp_mode");
}

TEST_CASE("xhttp: paths and modes by name", "[xhttp]") {
  CHECK(normalize_path("") == "/");
  CHECK(normalize_path("x") == "/x/");
  CHECK(normalize_path("/x?ed=1") == "/x/");
  CHECK(normalize_path("/x/") == "/x/");
  for (auto m : {mode::any, mode::packet_up, mode::stream_up, mode::stream_one}) CHECK(mode_named(to_string(m)) == m);
  CHECK(!mode_named("packet"));
}

TEST_CASE("xhttp chunked decoder: bodies split anywhere decode the same", "[xhttp]") {
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (std::size_t step = 1; step <= body.size(); ++step) {
    chunked_decoder d;
    std::string out, in;
    std::size_t pos = 0;
    bool done = false;
    while (pos < body.size() && !done) {
      in += body.substr(pos, step);
      pos += step;
      auto r = d.feed(in, out, 1 << 20);
      REQUIRE(!r.invalid());
      in.erase(0, r.consumed);
      done = r.complete();
    }
    CHECK(done);
    CHECK(out == "hello world");
    CHECK((in + body.substr(std::min(pos, body.size()))).substr(0, 4) == "NEXT");  // what follows is left
  }
}

TEST_CASE("xhttp chunked decoder: room bounds what it appends, and bad framing is refused", "[xhttp]") {
  chunked_decoder d;
  std::string out;
  auto r = d.feed("a\r\n0123456789\r\n0\r\n\r\n", out, 4);
  CHECK(r.need_more());
  CHECK(out == "0123");
  CHECK(r.consumed == 7);
  r = d.feed(std::string_view("a\r\n0123456789\r\n0\r\n\r\n").substr(7), out, 100);
  CHECK(r.complete());
  CHECK(out == "0123456789");

  for (std::string bad : {"x\r\n", "5\r\nhelloX", "5\nhello", "ffffffffffffffff\r\n", "\r\n"}) {
    chunked_decoder b;
    std::string o;
    CHECK(b.feed(bad, o, 100).invalid());
  }
}

TEST_CASE("xhttp uplink order: reorders, refuses replays, gaps and 2^63", "[xhttp]") {
  uplink_order o(3, 100);
  CHECK(o.accept(1, "b").empty());
  CHECK(o.accept(2, "c").empty());
  CHECK(o.take().empty());
  CHECK(o.accept(0, "a").empty());
  CHECK(o.take() == "abc");
  CHECK(o.next_seq() == 3);
  CHECK(o.accept(2, "again") == "xhttp_seq_replay");
  CHECK(o.accept(5, "f").empty());
  CHECK(o.accept(5, "f") == "xhttp_seq_replay");
  CHECK(o.accept(7, "h") == "xhttp_seq_gap");  // more than 3 past the next
  CHECK(o.accept(std::uint64_t{1} << 63, "x") == "xhttp_seq_gap");
  CHECK(o.admit(4, 100) == "wait");
  CHECK(o.admit(3, 1000).empty());  // the next seq is always taken
  CHECK(o.admit(9, 1) == "xhttp_seq_gap");
  CHECK(o.accept(4, std::string(100, 'e')) == "xhttp_reorder_full");
  CHECK(o.accept(4, "e").empty());
  CHECK(o.accept(6, "g").empty());
  CHECK(o.accept(3, "d").empty());
  CHECK(o.take() == "defg");
  CHECK(o.held() == 0);
  CHECK(o.held_bytes() == 0);
}

TEST_CASE("http parser: chunked requests only where the caller decodes them", "[xhttp][http]") {
  const std::string head = "POST /x/abc HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(http::parse_request(head).invalid());
  auto r = http::parse_request(head, http::body_framing::chunked_too);
  REQUIRE(r.complete());
  CHECK(r.value.chunked);
  CHECK(http::parse_request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", http::body_framing::chunked_too)
            .invalid());
  CHECK(http::parse_request("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                            http::body_framing::chunked_too)
            .invalid());
}

TEST_CASE("xhttp transport keys: validated, described and carried by the link", "[xhttp][transport]") {
  transport_keys keys;
  keys.transport = "xhttp";
  keys.path = "/xh";
  keys.mode = "packet-up";
  keys.padding_bytes = "10-20";
  keys.max_post_bytes = 65536;
  keys.max_buffered_posts = 8;
  keys.session_timeout_ms = 500;
  keys.tls = false;
  transport_spec t;
  CHECK(validate_transport(keys, t).empty());
  CHECK(t.kind == transport_kind::xhttp);
  CHECK(t.xhttp_mode == mode::packet_up);
  CHECK(t.padding_min == 10);
  CHECK(t.padding_max == 20);
  CHECK(t.max_post_bytes == 65536);
  CHECK(t.max_buffered_posts == 8);
  CHECK(t.session_timeout_ms == 500);
  CHECK(describe(t) == "xhttp path=/xh mode=packet-up padding=10-20 plain");

  keys.mode = "packet";
  keys.padding_bytes = "20-10";
  keys.max_post_bytes = 1;
  const auto errors = validate_transport(keys, t);
  REQUIRE(errors.size() == 3);
  CHECK(errors[0].first == "mode");
  CHECK(errors[1].first == "padding_bytes");
  CHECK(errors[2].first == "max_post_bytes");

  transport_keys ws;
  ws.transport = "ws";
  ws.mode = "auto";
  const auto ws_errors = validate_transport(ws, t);
  REQUIRE(ws_errors.size() == 1);
  CHECK(ws_errors[0].second == "only for transport = \"xhttp\"");

  // The link's query: type=xhttp with path, mode and alpn; it parses back equal.
  transport_spec link;
  link.kind = transport_kind::xhttp;
  link.path = "/xh";
  link.xhttp_mode = mode::stream_one;
  link.alpn = "http/1.1";
  query_params params;
  for (const auto& [k, v] : transport_query(link)) params.emplace(std::string(k), v);
  CHECK(params.at("type") == "xhttp");
  CHECK(params.at("mode") == "stream-one");
  CHECK(params.at("alpn") == "http/1.1");
  std::string reason;
  const auto back = parse_transport_query(params, reason);
  REQUIRE(back);
  CHECK(*back == link);
  params["mode"] = "bulk";
  CHECK(!parse_transport_query(params, reason));
  CHECK(reason.find("not an XHTTP mode") != std::string::npos);
}

TEST_CASE("post_gaps: packet-up's POST spacing in arrival order", "[xhttp]") {
  post_gaps g;
  CHECK(g.count() == 0);
  CHECK_FALSE(g.median_us());
  CHECK_FALSE(g.max_us());
  g.arrived(100);  // one POST: no gap yet
  CHECK(g.posts() == 1);
  CHECK(g.count() == 0);
  CHECK_FALSE(g.median_us());
  g.arrived(30'200);   // 30.1 ms
  g.arrived(70'300);   // 40.1 ms
  g.arrived(100'400);  // 30.1 ms
  CHECK(g.count() == 3);
  CHECK(*g.median_us() == 30'100);
  CHECK(*g.max_us() == 40'100);
  g.arrived(100'000);  // noted after a later one: a gap of 0, the clock never runs back
  CHECK(g.count() == 4);
  CHECK(*g.median_us() == 30'100);  // 0, 30.1, 30.1, 40.1
  g.arrived(100'500);               // 0.1 ms after the latest (100.4), not after 100.0
  CHECK(*g.max_us() == 40'100);
  CHECK(*g.median_us() == 30'100);
}

TEST_CASE("post_gaps: bounded memory, count and max over every POST", "[xhttp]") {
  post_gaps g;
  for (std::int64_t i = 0; i <= static_cast<std::int64_t>(post_gaps::max_kept); ++i) g.arrived(i * 10);
  g.arrived(static_cast<std::int64_t>(post_gaps::max_kept) * 10 + 5'000);  // past the kept ones
  CHECK(g.count() == post_gaps::max_kept + 1);
  CHECK(*g.max_us() == 5'000);  // counted although not kept
  CHECK(*g.median_us() == 10);  // over the first max_kept gaps
}
