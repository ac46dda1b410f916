#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "core/wire/http_parser.hpp"

using namespace vlessbench;
using namespace std::string_literals;
using vlessbench::http::parse_request;
using vlessbench::http::parse_response;

namespace {

bool same_headers(const std::vector<http::header>& a, const std::vector<http::header>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  return true;
}

bool same_request(const parse_result<http::request>& a, const parse_result<http::request>& b) {
  return a.status == b.status && a.consumed == b.consumed && a.reason == b.reason && a.value.method == b.value.method &&
         a.value.target == b.value.target && a.value.version_minor == b.value.version_minor &&
         same_headers(a.value.headers, b.value.headers) && a.value.content_length == b.value.content_length &&
         a.value.keep_alive == b.value.keep_alive;
}

bool same_response(const parse_result<http::response>& a, const parse_result<http::response>& b) {
  return a.status == b.status && a.consumed == b.consumed && a.reason == b.reason && a.value.status == b.value.status &&
         a.value.reason == b.value.reason && a.value.version_minor == b.value.version_minor &&
         same_headers(a.value.headers, b.value.headers) && a.value.content_length == b.value.content_length &&
         a.value.chunked == b.value.chunked && a.value.keep_alive == b.value.keep_alive;
}

std::string_view request_reason(std::string_view text) {
  const auto r = parse_request(text);
  return r.invalid() ? r.reason : std::string_view("(not invalid)");
}

std::string_view response_reason(std::string_view text) {
  const auto r = parse_response(text);
  return r.invalid() ? r.reason : std::string_view("(not invalid)");
}

// A request whose head is exactly `size` bytes: the padding goes into one header value.
std::string request_of_head_size(std::size_t size) {
  const std::string start = "GET / HTTP/1.1\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  return start + std::string(size - start.size() - end.size(), 'a') + end;
}

const std::string get_request =
    "GET /bytes/100?x=1 HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "User-Agent: vlessbench/0.1\r\n"
    "X-Vlessbench-Seq:   42  \r\n"
    "\r\n";
const std::string head_request = "HEAD / HTTP/1.0\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n";
const std::string post_request =
    "POST /sink HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\n";

}  // namespace

TEST_CASE("iequals compares ASCII case-insensitively", "[http]") {
  CHECK(http::iequals("Content-Length", "content-length"));
  CHECK(http::iequals("", ""));
  CHECK_FALSE(http::iequals("content-length", "content-lengths"));
  CHECK_FALSE(http::iequals("a", "b"));
  // '@' and '`' differ from 'A'/'a' by the case bit; they must not match.
  CHECK_FALSE(http::iequals("@", "`"));
  CHECK_FALSE(http::iequals("[", "{"));
}

TEST_CASE("valid GET with headers", "[http]") {
  const auto r = parse_request(get_request);
  REQUIRE(r.complete());
  CHECK(r.consumed == get_request.size());
  CHECK(r.reason.empty());
  CHECK(r.value.method == "GET");
  CHECK(r.value.target == "/bytes/100?x=1");
  CHECK(r.value.version_minor == 1);
  REQUIRE(r.value.headers.size() == 3);
  CHECK(r.value.headers[0].name == "Host");
  CHECK(r.value.headers[0].value == "127.0.0.1:8080");
  CHECK(r.value.headers[2].name == "X-Vlessbench-Seq");
  CHECK(r.value.headers[2].value == "42");  // OWS on both sides trimmed
  CHECK(r.value.content_length == 0);
  CHECK(r.value.keep_alive);
  CHECK(r.value.find("host") == std::optional<std::string_view>("127.0.0.1:8080"));
  CHECK(r.value.find("USER-AGENT") == std::optional<std::string_view>("vlessbench/0.1"));
  CHECK_FALSE(r.value.find("Hos").has_value());
  CHECK_FALSE(r.value.find("Cookie").has_value());
}

TEST_CASE("valid HEAD on HTTP/1.0 with keep-alive", "[http]") {
  const auto r = parse_request(head_request);
  REQUIRE(r.complete());
  CHECK(r.consumed == head_request.size());
  CHECK(r.value.method == "HEAD");
  CHECK(r.value.target == "/");
  CHECK(r.value.version_minor == 0);
  CHECK(r.value.keep_alive);
}

TEST_CASE("valid POST with content-length, body is not consumed", "[http]") {
  const auto r = parse_request(post_request + "hello");
  REQUIRE(r.complete());
  CHECK(r.consumed == post_request.size());
  CHECK(r.value.method == "POST");
  CHECK(r.value.target == "/sink");
  CHECK(r.value.content_length == 5);
  CHECK(r.value.headers.size() == 3);
}

TEST_CASE("find returns the first of repeated headers", "[http]") {
  const auto r = parse_request("GET / HTTP/1.1\r\nX-A: one\r\nx-a: two\r\n\r\n");
  REQUIRE(r.complete());
  CHECK(r.value.find("X-a") == std::optional<std::string_view>("one"));
  CHECK(r.value.headers.size() == 2);
}

TEST_CASE("request-target forms", "[http]") {
  CHECK(parse_request("GET http://example.com/x HTTP/1.1\r\n\r\n").value.target == "http://example.com/x");
  CHECK(parse_request("GET HTTP://example.com HTTP/1.1\r\n\r\n").complete());
  CHECK(parse_request("OPTIONS * HTTP/1.1\r\n\r\n").value.target == "*");
  CHECK(parse_request("GET /%7Efoo?a=b&c=%20 HTTP/1.1\r\n\r\n").complete());
  CHECK(parse_request("M-SEARCH / HTTP/1.1\r\n\r\n").value.method == "M-SEARCH");
  CHECK(request_reason("GET * HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET http:// HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET http:///x HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET https://example.com/ HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET example.com:443 HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("CONNECT example.com:443 HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET x HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /a#frag HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /\x7f HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /\x01 HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /\xc3\xa9 HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /a\tb HTTP/1.1\r\n\r\n") == "bad request line");
}

TEST_CASE("bad request lines", "[http]") {
  CHECK(request_reason("GET / HTTP/1.1\r\n\r\n") == "(not invalid)");  // the reference shape
  CHECK(request_reason("\r\nGET / HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("\r\n") == "bad request line");
  CHECK(request_reason("GET /  HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET  / HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason(" GET / HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/1.1 \r\n\r\n") == "bad request line");
  CHECK(request_reason("GET\t/ HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET\r\n\r\n") == "bad request line");
  CHECK(request_reason("G(T / HTTP/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / http/1.1\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/1.1x\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/11\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/2\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/1.1\n\r\n") == "bad request line");  // bare LF
  CHECK(request_reason("GET / HTTP/1.1\r\r\n\r\n") == "bad request line");
  CHECK(request_reason("GET /\0 HTTP/1.1\r\n\r\n"s) == "bad request line");
}

TEST_CASE("unsupported HTTP versions", "[http]") {
  CHECK(request_reason("GET / HTTP/2.0\r\n\r\n") == "bad version");
  CHECK(request_reason("GET / HTTP/1.2\r\n\r\n") == "bad version");
  CHECK(request_reason("GET / HTTP/0.9\r\n\r\n") == "bad version");
  CHECK(request_reason("GET / HTTP/9.9\r\n\r\n") == "bad version");
}

TEST_CASE("bad header lines", "[http]") {
  const std::string start = "GET / HTTP/1.1\r\n";
  CHECK(request_reason(start + "Host : a\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "Host\t: a\r\n\r\n") == "bad header");
  CHECK(request_reason(start + " Host: a\r\n\r\n") == "bad header");           // whitespace before the first field
  CHECK(request_reason(start + "X-A: one\r\n two\r\n\r\n") == "bad header");   // obs-fold
  CHECK(request_reason(start + "X-A: one\r\n\ttwo\r\n\r\n") == "bad header");  // obs-fold with HTAB
  CHECK(request_reason(start + "X-A one\r\n\r\n") == "bad header");
  CHECK(request_reason(start + ": value\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "X(A): v\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "X-A: a\0b\r\n\r\n"s) == "bad header");
  CHECK(request_reason(start + "X-A: a\rb\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "X-A: a\x7f\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "X-A: a\x01\r\n\r\n") == "bad header");
  CHECK(request_reason(start + "X-A: a\nX-B: b\r\n\r\n") == "bad header");  // bare LF in a field
  CHECK(request_reason(start + "X-A: a\r\n\n") == "bad header");            // bare LF as the end
  CHECK(request_reason(start + "\n") == "bad header");
}

TEST_CASE("header values: what is allowed and how it is trimmed", "[http]") {
  const auto r = parse_request(
      "GET / HTTP/1.1\r\nX-Empty:\r\nX-Blank: \t \r\nX-Inner: a \t b\r\nX-Obs: caf\xc3\xa9\r\nX-Colon: a:b\r\n\r\n");
  REQUIRE(r.complete());
  REQUIRE(r.value.headers.size() == 5);
  CHECK(r.value.headers[0].value.empty());
  CHECK(r.value.headers[1].value.empty());
  CHECK(r.value.headers[2].value == "a \t b");
  CHECK(r.value.headers[3].value == "caf\xc3\xa9");
  CHECK(r.value.headers[4].name == "X-Colon");
  CHECK(r.value.headers[4].value == "a:b");
}

TEST_CASE("at most 100 headers", "[http]") {
  std::string head = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) head += "X-H" + std::to_string(i) + ": v\r\n";
  const auto ok = parse_request(head + "\r\n");
  REQUIRE(ok.complete());
  REQUIRE(ok.value.headers.size() == 100);
  CHECK(ok.value.headers[99].name == "X-H99");
  CHECK(request_reason(head + "X-H100: v\r\n\r\n") == "too many headers");
  // Reported as soon as the 101st line is complete, without waiting for the end of the head.
  CHECK(request_reason(head + "X-H100: v\r\n") == "too many headers");
}

TEST_CASE("content-length", "[http]") {
  const std::string start = "POST /sink HTTP/1.1\r\n";
  CHECK(parse_request(start + "Content-Length: 0\r\n\r\n").value.content_length == 0);
  CHECK(parse_request(start + "content-length:  007 \r\n\r\n").value.content_length == 7);
  CHECK(parse_request(start + "Content-Length: 9223372036854775807\r\n\r\n").value.content_length ==
        9223372036854775807ull);
  CHECK(parse_request(start + "Content-Length: 9223372036854775808\r\n\r\n").value.content_length ==
        9223372036854775808ull);
  CHECK(request_reason(start + "Content-Length: 9223372036854775809\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 18446744073709551616\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 99999999999999999999999\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length:\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: -1\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: +1\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 0x10\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 1 2\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 5, 5\r\n\r\n") == "bad content-length");
  CHECK(request_reason(start + "Content-Length: 5\r\nContent-Length: 5\r\n\r\n") == "conflicting content-length");
  CHECK(request_reason(start + "Content-Length: 5\r\ncontent-length: 6\r\n\r\n") == "conflicting content-length");
  CHECK(request_reason(start + "Content-Length: 5\r\nContent-Length: x\r\n\r\n") == "conflicting content-length");
}

TEST_CASE("transfer-encoding on a request is refused", "[http]") {
  const std::string start = "POST /sink HTTP/1.1\r\n";
  CHECK(request_reason(start + "Transfer-Encoding: chunked\r\n\r\n") == "transfer-encoding not supported");
  CHECK(request_reason(start + "transfer-encoding: gzip\r\n\r\n") == "transfer-encoding not supported");
  CHECK(request_reason(start + "Transfer-Encoding:\r\n\r\n") == "transfer-encoding not supported");
  CHECK(request_reason(start + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n") ==
        "transfer-encoding not supported");
  CHECK(request_reason(start + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n") ==
        "transfer-encoding not supported");
  // Near-misses are ordinary headers.
  CHECK(parse_request(start + "Transfer-Encodings: chunked\r\n\r\n").complete());
  CHECK(request_reason(start + "Transfer-Encoding : chunked\r\n\r\n") == "bad header");
}

TEST_CASE("request keep-alive from version and Connection", "[http]") {
  const auto keep_alive = [](const std::string& version, const std::string& fields) {
    const auto r = parse_request("GET / " + version + "\r\n" + fields + "\r\n");
    REQUIRE(r.complete());
    return r.value.keep_alive;
  };
  CHECK(keep_alive("HTTP/1.1", ""));
  CHECK_FALSE(keep_alive("HTTP/1.1", "Connection: close\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.1", "connection: CLOSE\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.1", "Connection: Upgrade, close\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.1", "Connection: upgrade\r\nConnection: close\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.1", "Connection: ,close,\r\n"));
  CHECK(keep_alive("HTTP/1.1", "Connection: closed\r\n"));
  CHECK(keep_alive("HTTP/1.1", "Connection: keep-alive\r\n"));
  CHECK(keep_alive("HTTP/1.1", "X-Connection: close\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.0", ""));
  CHECK(keep_alive("HTTP/1.0", "Connection: keep-alive\r\n"));
  CHECK(keep_alive("HTTP/1.0", "Connection: TE, Keep-Alive\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.0", "Connection: keep-alive, close\r\n"));
  CHECK_FALSE(keep_alive("HTTP/1.0", "Connection: keep-alives\r\n"));
}

TEST_CASE("every split of a valid request: need_more, then the same result", "[http]") {
  const std::string body = "hello";
  for (const auto& head : {get_request, head_request, post_request}) {
    const std::string text = head + body;
    const auto whole = parse_request(text);
    REQUIRE(whole.complete());
    REQUIRE(whole.consumed == head.size());
    for (std::size_t n = 0; n < head.size(); ++n) {
      INFO("prefix length " << n);
      const auto part = parse_request(std::string_view(text).substr(0, n));
      CHECK(part.need_more());
      CHECK(part.consumed == 0);
      CHECK(part.value.headers.empty());  // nothing half-parsed leaks out
    }
    for (std::size_t n = head.size(); n <= text.size(); ++n) {
      INFO("prefix length " << n);
      CHECK(same_request(parse_request(std::string_view(text).substr(0, n)), whole));
    }
  }
}

TEST_CASE("pipelined requests parse one after another", "[http]") {
  const std::string two = get_request + post_request + "hello";
  std::string_view rest = two;
  const auto first = parse_request(rest);
  REQUIRE(first.complete());
  CHECK(first.value.method == "GET");
  rest.remove_prefix(first.consumed);
  const auto second = parse_request(rest);
  REQUIRE(second.complete());
  CHECK(second.value.method == "POST");
  CHECK(second.value.content_length == 5);
  rest.remove_prefix(second.consumed);
  CHECK(rest == "hello");

  const std::string three = head_request + get_request + "DELETE /x HTTP/1.1\r\nConnection: close\r\n\r\n";
  rest = three;
  std::vector<std::string> methods;
  while (!rest.empty()) {
    const auto r = parse_request(rest);
    REQUIRE(r.complete());
    methods.push_back(r.value.method);
    rest.remove_prefix(r.consumed);
  }
  CHECK(methods == std::vector<std::string>{"HEAD", "GET", "DELETE"});

  // A partial second request after a complete first one does not disturb the first.
  const auto with_partial = parse_request(get_request + "GET / HT");
  REQUIRE(with_partial.complete());
  CHECK(with_partial.consumed == get_request.size());
  CHECK(parse_request("GET / HT").need_more());
}

TEST_CASE("errors are reported as soon as the bad line is complete", "[http]") {
  CHECK(request_reason("GET / HTTP/1.1 \r\n") == "bad request line");
  CHECK(request_reason("GET / HTTP/1.1\r\nHost : a\r\n") == "bad header");
  CHECK(request_reason("GET / HTTP/1.1\n") == "bad request line");
  // ...but not before: an unfinished line could still turn out good.
  CHECK(parse_request("GET / HTTP/1.1\r\nHost : a").need_more());
  CHECK(parse_request("").need_more());
  CHECK(parse_request("GET / HTTP/1.1\r\n").need_more());
  CHECK(parse_request("GET / HTTP/1.1\r\n\r").need_more());
}

TEST_CASE("head size limit at and past the boundary", "[http]") {
  const auto limit = http::max_head_bytes;
  REQUIRE(limit == 16384);

  const auto at_limit = request_of_head_size(limit);
  REQUIRE(at_limit.size() == limit);
  const auto ok = parse_request(at_limit + "GET");  // followed by a pipelined request's start
  REQUIRE(ok.complete());
  CHECK(ok.consumed == limit);
  REQUIRE(ok.value.headers.size() == 1);
  CHECK(ok.value.headers[0].value.size() == limit - 27);

  const auto past = request_of_head_size(limit + 1);
  CHECK(request_reason(past) == "header too large");
  // The final LF alone past the limit is enough to refuse.
  CHECK(request_reason(past.substr(0, limit)) == "header too large");
  // One byte short of the limit and no end yet: it may still end in time.
  CHECK(parse_request(past.substr(0, limit - 1)).need_more());
  CHECK(parse_request(at_limit.substr(0, limit - 1)).need_more());

  // A buffer holding limit bytes without an end is refused at once, without waiting for more.
  const std::string endless = "GET / HTTP/1.1\r\nX-Pad: " + std::string(limit, 'a');
  CHECK(request_reason(endless.substr(0, limit)) == "header too large");
  CHECK(request_reason(endless) == "header too large");
  CHECK(request_reason(std::string(limit, 'G')) == "header too large");
  CHECK(response_reason("HTTP/1.1 200 OK\r\nX: " + std::string(limit, 'a') + "\r\n\r\n") == "header too large");
}

TEST_CASE("response: 200 with content-length", "[http]") {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX-Vlessbench-Route: direct\r\n\r\n";
  const auto r = parse_response(head + "hello world!");
  REQUIRE(r.complete());
  CHECK(r.consumed == head.size());
  CHECK(r.value.status == 200);
  CHECK(r.value.reason == "OK");
  CHECK(r.value.version_minor == 1);
  CHECK(r.value.content_length == std::optional<std::uint64_t>(12));
  CHECK_FALSE(r.value.chunked);
  CHECK(r.value.keep_alive);
  CHECK(r.value.find("x-vlessbench-route") == std::optional<std::string_view>("direct"));
  for (std::size_t n = 0; n < head.size(); ++n) CHECK(parse_response(head.substr(0, n)).need_more());
  CHECK(same_response(parse_response(head), r));
}

TEST_CASE("response: 204 without a body and with an empty reason", "[http]") {
  const auto r = parse_response("HTTP/1.1 204 No Content\r\n\r\n");
  REQUIRE(r.complete());
  CHECK(r.value.status == 204);
  CHECK(r.value.reason == "No Content");
  CHECK_FALSE(r.value.content_length.has_value());
  CHECK_FALSE(r.value.chunked);
  CHECK(r.value.keep_alive);

  const auto empty = parse_response("HTTP/1.1 204 \r\n\r\n");
  REQUIRE(empty.complete());
  CHECK(empty.value.status == 204);
  CHECK(empty.value.reason.empty());
  CHECK(parse_response("HTTP/1.1 404 Not\tFound  \r\n\r\n").value.reason == "Not\tFound  ");
}

TEST_CASE("response: chunked from the last transfer coding", "[http]") {
  const auto chunked = [](const std::string& fields) {
    const auto r = parse_response("HTTP/1.1 200 OK\r\n" + fields + "\r\n");
    REQUIRE(r.complete());
    CHECK_FALSE(r.value.content_length.has_value());
    return r.value.chunked;
  };
  CHECK(chunked("Transfer-Encoding: chunked\r\n"));
  CHECK(chunked("transfer-encoding: Chunked\r\n"));
  CHECK(chunked("Transfer-Encoding: gzip, chunked\r\n"));
  CHECK(chunked("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"));
  CHECK(chunked("Transfer-Encoding: gzip,chunked , \r\n"));
  CHECK_FALSE(chunked("Transfer-Encoding: chunked, gzip\r\n"));
  CHECK_FALSE(chunked("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"));
  CHECK_FALSE(chunked("Transfer-Encoding: chunkedx\r\n"));
  CHECK_FALSE(chunked("Transfer-Encoding:\r\n"));
  CHECK_FALSE(chunked("X-Transfer-Encoding: chunked\r\n"));
  CHECK(response_reason("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n") ==
        "content-length with transfer-encoding");
  CHECK(response_reason("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n") ==
        "content-length with transfer-encoding");
}

TEST_CASE("response: HTTP/1.0 closes unless keep-alive", "[http]") {
  const auto r = parse_response("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
  REQUIRE(r.complete());
  CHECK(r.value.version_minor == 0);
  CHECK_FALSE(r.value.keep_alive);
  CHECK(r.value.content_length == std::optional<std::uint64_t>(2));
  CHECK(parse_response("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n").value.keep_alive);
  CHECK_FALSE(parse_response("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n").value.keep_alive);
  // A complete result only: an invalid one keeps the default-constructed value.
  CHECK(parse_response("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n").complete());
}

TEST_CASE("response: pipelined heads and bodies are not consumed", "[http]") {
  const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
  const std::string second = "HTTP/1.1 204 No Content\r\n\r\n";
  const std::string all = first + "ok" + second;
  const auto a = parse_response(all);
  REQUIRE(a.complete());
  CHECK(a.consumed == first.size());
  const auto b = parse_response(std::string_view(all).substr(a.consumed + *a.value.content_length));
  REQUIRE(b.complete());
  CHECK(b.value.status == 204);
  CHECK(b.consumed == second.size());
}

TEST_CASE("bad status lines and response headers", "[http]") {
  CHECK(response_reason("HTTP/1.1 200\r\n\r\n") == "bad status line");  // SP before the reason is required
  CHECK(response_reason("HTTP/1.1  200 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 20 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 2000 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 2x0 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 099 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 600 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 200 O\x01K\r\n\r\n") == "bad status line");
  CHECK(response_reason("http/1.1 200 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1\r\n\r\n") == "bad status line");
  CHECK(response_reason("\r\nHTTP/1.1 200 OK\r\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/1.1 200 OK\n\r\n") == "bad status line");
  CHECK(response_reason("HTTP/2.0 200 OK\r\n\r\n") == "bad version");
  CHECK(response_reason("HTTP/1.2 200 OK\r\n\r\n") == "bad version");
  CHECK(parse_response("HTTP/1.1 100 Continue\r\n\r\n").value.status == 100);
  CHECK(parse_response("HTTP/1.1 599 x\r\n\r\n").value.status == 599);

  const std::string start = "HTTP/1.1 200 OK\r\n";
  CHECK(response_reason(start + "Server : x\r\n\r\n") == "bad header");
  CHECK(response_reason(start + "X-A: 1\r\n 2\r\n\r\n") == "bad header");
  CHECK(response_reason(start + "Content-Length: 1\r\nContent-Length: 1\r\n\r\n") == "conflicting content-length");
  CHECK(response_reason(start + "Content-Length: 1.0\r\n\r\n") == "bad content-length");
  std::string many = start;
  for (int i = 0; i <= 100; ++i) many += "X: v\r\n";
  CHECK(response_reason(many + "\r\n") == "too many headers");
}
