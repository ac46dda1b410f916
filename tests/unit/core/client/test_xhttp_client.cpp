#include <catch2/catch.hpp>

#include "core/client/xhttp_client.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/xhttp_request.hpp"

using namespace vlessbench;
using namespace vlessbench::xhttp;

namespace {

client_settings settings(mode m = mode::packet_up) {
  transport_spec t;
  t.kind = transport_kind::xhttp;
  t.path = "/xh";
  t.xhttp_mode = m;
  return settings_for(t, "bench.example", std::chrono::milliseconds(30));
}

// What the daemon's reading of a request (core/wire/xhttp_request.hpp) makes of the head we build.
parse_result<request_target> classify_head(const std::string& head, mode allowed = mode::any) {
  const auto r = http::parse_request(head, http::body_framing::chunked_too);
  REQUIRE(r.complete());
  return classify(r.value.method, r.value.target, r.value.find("Referer"), rules{"/xh/", allowed, 100, 1000});
}

}  // namespace

TEST_CASE("xhttp client: HTTP version and mode from the link", "[xhttp]") {
  transport_spec t;
  t.kind = transport_kind::xhttp;
  CHECK(version_for(t) == http_version::h2);  // TLS without alpn: h2, as Xray
  t.alpn = "http/1.1";
  CHECK(version_for(t) == http_version::h1);
  t.tls = false;
  t.alpn.clear();
  CHECK(version_for(t) == http_version::h1);  // plain: HTTP/1.1 unless the link says h2 (h2c)
  t.alpn = "h2";
  CHECK(version_for(t) == http_version::h2);
  CHECK(client_mode(mode::any) == mode::packet_up);
  CHECK(client_mode(mode::stream_one) == mode::stream_one);
  CHECK(settings().path == "/xh/");
}

TEST_CASE("xhttp client: padding stays in its range", "[xhttp]") {
  const auto s = settings();
  CHECK(padding_length(s, 0) == 100);
  CHECK(padding_length(s, 900) == 1000);
  CHECK(padding_length(s, 901) == 100);
  CHECK(padding_length(s, ~std::uint64_t{0}) <= 1000);
  for (int i = 0; i < 200; ++i) {
    const auto n = random_padding_length(s);
    CHECK(n >= 100);
    CHECK(n <= 1000);
  }
  auto one = s;
  one.padding_min = one.padding_max = 7;
  CHECK(padding_length(one, 12345) == 7);
}

TEST_CASE("xhttp client: the requests it builds are the ones the server reads", "[xhttp]") {
  const auto s = settings();
  const std::string id = new_session_id();
  CHECK(id.size() == 36);
  CHECK(id != new_session_id());

  const auto one = classify_head(h1_head(s, "POST", request_path(s), 100, h1_body::chunked));
  REQUIRE(one.complete());
  CHECK(one.value.kind == request_kind::stream_one);
  CHECK(one.value.padding == 100);

  const auto get = classify_head(h1_head(s, "GET", request_path(s, id), 1000, h1_body::none));
  REQUIRE(get.complete());
  CHECK(get.value.kind == request_kind::download);
  CHECK(get.value.session == id);

  const std::string post = h1_head(s, "POST", request_path(s, id, 7), 555, h1_body::length, 12);
  CHECK(post.find("Content-Length: 12\r\n") != std::string::npos);
  CHECK(post.find("Host: bench.example\r\n") != std::string::npos);
  CHECK(post.find("Referer: https://bench.example/xh/" + id + "/7?x_padding=XXX") != std::string::npos);
  const auto packet = classify_head(post);
  REQUIRE(packet.complete());
  CHECK(packet.value.kind == request_kind::packet);
  CHECK(packet.value.seq == 7);
  CHECK(packet.value.padding == 555);

  // Padding out of the server's range is what the server refuses: the builder is not lenient.
  CHECK(classify_head(h1_head(s, "GET", request_path(s, id), 99, h1_body::none)).reason == "xhttp_padding");
}

TEST_CASE("xhttp client: chunks and the HTTP/1.1 downlink", "[xhttp]") {
  std::string body;
  append_chunk(body, "");
  CHECK(body.empty());  // never the last chunk by accident
  append_chunk(body, std::string(26, 'a'));
  CHECK(body == "1a\r\n" + std::string(26, 'a') + "\r\n");

  h1_downlink d;
  std::string out;
  const std::string answer =
      "HTTP/1.1 200 OK\r\nX-Padding: XXXX\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n";
  for (char c : answer) REQUIRE(d.feed(std::string_view(&c, 1), out).empty());  // split anywhere
  CHECK(out == "helloabc");
  CHECK(d.ended());

  h1_downlink refused;
  CHECK(refused.feed("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", out) == "404 Not Found");
  h1_downlink bad;
  CHECK_FALSE(bad.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", out).empty());
}

TEST_CASE("xhttp client: answers to packet-up POSTs", "[xhttp]") {
  h1_answers a;
  CHECK(a.feed("HTTP/1.1 200 OK\r\nX-Padding: XX\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Len").empty());
  CHECK(a.answered() == 1);
  CHECK(a.feed("gth: 2\r\n\r\nok").empty());
  CHECK(a.answered() == 2);
  CHECK_FALSE(a.closing());
  CHECK(a.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").empty());
  CHECK(a.closing());
  CHECK(a.feed("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n") == "413 Payload Too Large");
}
