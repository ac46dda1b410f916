#pragma once
// The HTTP/1.1 upgrade that opens the WebSocket and HTTPUpgrade transports, parsed from bytes
// (no sockets), both sides: the daemon reads the client's request head (parse_upgrade_request)
// and answers 101 or an error status; the one VLESS client writes the request and checks the
// 101 (parse_upgrade_response).
//
// Early data: the first bytes of the VLESS stream may ride in the request, base64url without
// padding (standard alphabet and padding accepted too), in one of three places, as clients send it:
//   - Sec-WebSocket-Protocol (Xray, sing-box, mihomo, v2fly with earlyDataHeaderName set to it);
//     the 101 echoes the header, as browsers require;
//   - a configured header name (v2fly's earlyDataHeaderName);
//   - appended to the path (v2fly 4.37/4.38 without earlyDataHeaderName: GET /ws<base64>).
// v2ray 4.34 sends none (docs/methodology.md, "What 'new connection' includes per transport").
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::ws {

enum class upgrade_kind { websocket, httpupgrade };

struct upgrade_rules {
  upgrade_kind kind = upgrade_kind::websocket;
  std::string_view path = "/";         // matched against the request path (a query is ignored)
  std::string_view host;               // empty: any Host
  std::size_t max_early_data = 0;      // bytes; 0: early data is refused, never silently dropped
  std::string_view early_data_header;  // empty: Sec-WebSocket-Protocol
};

struct upgrade_request {
  std::string path;  // as requested, query included
  std::string host;
  std::string key;         // Sec-WebSocket-Key (websocket only)
  std::string early_data;  // decoded
  std::string protocol;    // Sec-WebSocket-Protocol to echo in the 101 (when early data came in it)
};

// Reasons (each a vless.reject reason): "bad_upgrade_request", "upgrade_head_too_large",
// "bad_method", "wrong_path", "wrong_host", "no_upgrade", "bad_websocket_version",
// "bad_websocket_key", "bad_early_data", "early_data_too_long". consumed = the head's size: what
// follows is the stream (frames for websocket, raw VLESS bytes for httpupgrade).
parse_result<upgrade_request> parse_upgrade_request(std::string_view buffer, const upgrade_rules& rules);

// The HTTP status the daemon answers a rejected upgrade with (404 wrong path/host, 405, 426, 431, 400).
int reject_status(std::string_view reason);
// A complete error response ("Connection: close", no body but the reason).
std::string format_reject_response(std::string_view reason);
// The 101 for a parsed request.
std::string format_upgrade_response(const upgrade_request& req, upgrade_kind kind);

// Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2: SHA-1, base64).
std::string accept_key(std::string_view key);

std::string base64_encode(std::string_view data, bool url_no_pad);
// Standard or URL alphabet, padding optional; nullopt on anything else.
std::optional<std::string> base64_decode(std::string_view text);

// The client side. early_data goes base64url into early_data_header (Sec-WebSocket-Protocol when
// empty); key is a base64 16-byte nonce (websocket only).
struct upgrade_request_spec {
  upgrade_kind kind = upgrade_kind::websocket;
  std::string_view path = "/";
  std::string_view host;
  std::string_view key;
  std::string_view early_data;
  std::string_view early_data_header;
};
std::string format_upgrade_request(const upgrade_request_spec& spec);
// The server's answer: complete when it is a valid 101 (value = its status), invalid with
// "upgrade_refused" (any other status), "bad_accept" or "bad_upgrade_response".
parse_result<int> parse_upgrade_response(std::string_view buffer, upgrade_kind kind, std::string_view key);

}  // namespace vlessbench::ws
