#include <catch2/catch.hpp>

#include <string>

#include "core/wire/ws_upgrade.hpp"

using namespace vlessbench;
using namespace vlessbench::ws;

namespace {

const std::string rfc_key = "dGhlIHNhbXBsZSBub25jZQ==";  // RFC 6455 §1.3

std::string request(const std::string& path, const std::string& extra, const std::string& key = rfc_key) {
  return "GET " + path +
         " HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: " +
         key + "\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n";
}

std::string reason(const std::string& text, const upgrade_rules& rules) {
  const auto r = parse_upgrade_request(text, rules);
  return r.invalid() ? std::string(r.reason) : r.complete() ? "(complete)" : "(need more)";
}

}  // namespace

TEST_CASE("ws upgrade: the RFC 6455 accept key and base64", "[ws]") {
  CHECK(accept_key(rfc_key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");  // RFC 6455 §1.3
  CHECK(accept_key("x3JJHMbDL1EzLkh9GBhXDw==") == "HSmrc0sMlYUkAGmm5OPpG2HaGWk=");
  // RFC 4648 §10 test vectors, both alphabets.
  const char* plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char* enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    CHECK(base64_encode(plain[i], false) == enc[i]);
    CHECK(base64_decode(enc[i]) == std::string(plain[i]));
    const auto url = base64_encode(plain[i], true);
    CHECK(url.find('=') == std::string::npos);
    CHECK(base64_decode(url) == std::string(plain[i]));
  }
  CHECK(base64_encode("\xfb\xff", true) == "-_8");
  CHECK(base64_decode("-_8") == std::string("\xfb\xff"));
  CHECK_FALSE(base64_decode("Zg=").has_value());  // wrong padding
  CHECK_FALSE(base64_decode("Z").has_value());
  CHECK_FALSE(base64_decode("Zh").has_value());  // non-zero leftover bits
  CHECK_FALSE(base64_decode("Zm9v!").has_value());
}

TEST_CASE("ws upgrade: a valid request, early data in each place clients put it", "[ws]") {
  upgrade_rules rules{upgrade_kind::websocket, "/ws", "", 2048, ""};
  SECTION("plain") {
    const std::string text = request("/ws", "") + "FRAMES";
    const auto r = parse_upgrade_request(text, rules);
    REQUIRE(r.complete());
    CHECK(r.consumed == text.size() - 6);
    CHECK(r.value.key == rfc_key);
    CHECK(r.value.early_data.empty());
    const std::string resp = format_upgrade_response(r.value, upgrade_kind::websocket);
    CHECK(resp.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") != std::string::npos);
    CHECK(resp.find("Sec-WebSocket-Protocol") == std::string::npos);
    CHECK(parse_upgrade_response(resp, upgrade_kind::websocket, rfc_key).complete());
    CHECK(parse_upgrade_response(resp, upgrade_kind::websocket, "x3JJHMbDL1EzLkh9GBhXDw==").reason == "bad_accept");
    // Every prefix of the head needs more.
    for (std::size_t k = 0; k + 6 < text.size(); k += 13)
      CHECK(parse_upgrade_request(text.substr(0, k), rules).need_more());
  }
  SECTION("Sec-WebSocket-Protocol (Xray, sing-box, mihomo), echoed") {
    const auto r = parse_upgrade_request(request("/ws?ed=2048", "Sec-WebSocket-Protocol: AAEC_w\r\n"), rules);
    REQUIRE(r.complete());
    CHECK(r.value.early_data == std::string("\x00\x01\x02\xff", 4));
    CHECK(format_upgrade_response(r.value, upgrade_kind::websocket).find("Sec-WebSocket-Protocol: AAEC_w\r\n") !=
          std::string::npos);
  }
  SECTION("a configured header (v2fly earlyDataHeaderName)") {
    upgrade_rules named = rules;
    named.early_data_header = "X-Early";
    const auto r = parse_upgrade_request(request("/ws", "X-Early: Zm9vYmFy\r\n"), named);
    REQUIRE(r.complete());
    CHECK(r.value.early_data == "foobar");
    CHECK(r.value.protocol.empty());
  }
  SECTION("after the path (v2fly 4.37)") {
    const auto r = parse_upgrade_request(request("/wsZm9vYmFy", ""), rules);
    REQUIRE(r.complete());
    CHECK(r.value.early_data == "foobar");
  }
  SECTION("the client side writes what the server reads") {
    const std::string text =
        format_upgrade_request({upgrade_kind::websocket, "/ws", "h.example", rfc_key, "hello", ""});
    const auto r = parse_upgrade_request(text, rules);
    REQUIRE(r.complete());
    CHECK(r.value.early_data == "hello");
    CHECK(r.value.host == "h.example");
  }
}

TEST_CASE("ws upgrade: refusals and their HTTP status", "[ws]") {
  upgrade_rules rules{upgrade_kind::websocket, "/ws", "server.example.com", 16, ""};
  CHECK(reason(request("/nope", ""), rules) == "wrong_path");
  CHECK(reason(request("/ws/x", ""), rules) == "wrong_path");
  CHECK(reject_status("wrong_path") == 404);
  upgrade_rules other_host = rules;
  other_host.host = "else.example";
  CHECK(reason(request("/ws", ""), other_host) == "wrong_host");
  CHECK(reason("GET /ws HTTP/1.1\r\nHost: server.example.com\r\n\r\n", rules) == "no_upgrade");
  CHECK(reject_status("no_upgrade") == 426);
  CHECK(reason("POST /ws HTTP/1.1\r\nHost: a\r\n\r\n", rules) == "bad_method");
  CHECK(reason(request("/ws", "", "short"), rules) == "bad_websocket_key");
  CHECK(reason(request("/ws", "Sec-WebSocket-Protocol: not*base64\r\n"), rules) == "bad_early_data");
  CHECK(reason(request("/ws", "Sec-WebSocket-Protocol: " + base64_encode(std::string(17, 'x'), true) + "\r\n"),
               rules) == "early_data_too_long");
  CHECK(reason(request("/ws", "Sec-WebSocket-Protocol: " + std::string(5000, 'A') + "\r\n"), rules) ==
        "early_data_too_long");
  CHECK(reason("GARBAGE\r\n\r\n", rules) == "bad_upgrade_request");
  CHECK(reason(request("/ws", "X-Pad: " + std::string(20000, 'p') + "\r\n"), rules) == "upgrade_head_too_large");
  const std::string resp = format_reject_response("wrong_path");
  CHECK(resp.rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
  CHECK(parse_upgrade_response(resp, upgrade_kind::websocket, rfc_key).reason == "upgrade_refused");
  // Without early data on the listener, a subprotocol offer is ignored, not early data.
  upgrade_rules no_ed = rules;
  no_ed.max_early_data = 0;
  const auto r = parse_upgrade_request(request("/ws", "Sec-WebSocket-Protocol: chat\r\n"), no_ed);
  REQUIRE(r.complete());
  CHECK(r.value.protocol.empty());
}

TEST_CASE("httpupgrade: no key, no accept, the stream follows the head", "[ws]") {
  upgrade_rules rules{upgrade_kind::httpupgrade, "/up", "", 0, ""};
  const std::string text = format_upgrade_request({upgrade_kind::httpupgrade, "/up", "h", "", "", ""}) + "VLESS";
  const auto r = parse_upgrade_request(text, rules);
  REQUIRE(r.complete());
  CHECK(text.substr(r.consumed) == "VLESS");
  const auto resp = format_upgrade_response(r.value, upgrade_kind::httpupgrade);
  CHECK(resp.find("Sec-WebSocket-Accept") == std::string::npos);
  CHECK(parse_upgrade_response(resp + "xx", upgrade_kind::httpupgrade, "").consumed == resp.size());
  CHECK(reason(format_upgrade_request({upgrade_kind::httpupgrade, "/upx", "h", "", "", ""}), rules) == "wrong_path");
}
