#include "core/wire/ws_upgrade.hpp"

#include <array>

#include <openssl/sha.h>

#include "core/wire/http_parser.hpp"
#include "core/wire/parse_invalid.hpp"

namespace vlessbench::ws {

namespace {

constexpr std::string_view accept_guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// True when the comma-separated header value lists token (case-insensitive).
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (http::iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// "name:port", "[v6]:port" or "name" -> name.
std::string_view host_part(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const auto end = host.find(']');
    return end == std::string_view::npos ? host : host.substr(1, end - 1);
  }
  const auto colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Encoded length of n bytes without padding.
std::size_t encoded_len(std::size_t n) { return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1); }

// Early data from text (base64), checked against the cap before decoding.
std::string_view take_early_data(std::string_view text, std::size_t max, std::string& out) {
  if (max == 0) return "early_data_too_long";  // not allowed on this listener
  std::string_view t = text;
  while (!t.empty() && t.back() == '=') t.remove_suffix(1);
  if (t.size() > encoded_len(max)) return "early_data_too_long";
  auto decoded = base64_decode(text);
  if (!decoded) return "bad_early_data";
  if (decoded->size() > max) return "early_data_too_long";
  out = std::move(*decoded);
  return {};
}

}  // namespace

std::string base64_encode(std::string_view data, bool url_no_pad) {
  const char* alphabet = url_no_pad ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                                    : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve(encoded_len(data.size()) + 2);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<std::uint8_t>(data[k])); };
  for (; i + 3 <= data.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += alphabet[(v >> s) & 63];
  }
  const std::size_t rest = data.size() - i;
  if (rest > 0) {
    const std::uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (rest == 2) out += alphabet[(v >> 6) & 63];
    if (!url_no_pad) out.append(3 - rest, '=');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::size_t pad = 0;
  while (!text.empty() && text.back() == '=' && pad < 2) {
    text.remove_suffix(1);
    ++pad;
  }
  if (pad > 0 && (text.size() + pad) % 4 != 0) return std::nullopt;
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = b64_value(c);
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Leftover bits must be zero (a canonical encoding), or two texts would decode alike.
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::string accept_key(std::string_view key) {
  std::string text(key);
  text += accept_guid;
  std::array<std::uint8_t, SHA_DIGEST_LENGTH> digest{};
  SHA1(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), digest.data());
  return base64_encode(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()), false);
}

parse_result<upgrade_request> parse_upgrade_request(std::string_view buffer, const upgrade_rules& rules) {
  const auto head = http::parse_request(buffer);
  if (head.need_more()) return {};
  if (head.invalid())
    return parse_invalid<upgrade_request>(head.reason == "header too large" ? "upgrade_head_too_large"
                                                                            : "bad_upgrade_request");
  const http::request& req = head.value;
  if (req.method != "GET") return parse_invalid<upgrade_request>("bad_method");
  if (req.content_length != 0) return parse_invalid<upgrade_request>("bad_upgrade_request");
  if (req.version_minor < 1) return parse_invalid<upgrade_request>("no_upgrade");
  upgrade_request out;
  out.path = req.target;
  const std::string_view target = req.target;
  const std::string_view path = target.substr(0, target.find('?'));
  std::string_view path_early;  // v2fly's early data after the path
  if (path != rules.path) {
    const bool suffix = rules.kind == upgrade_kind::websocket && rules.max_early_data > 0 &&
                        path.size() > rules.path.size() && path.substr(0, rules.path.size()) == rules.path;
    if (!suffix) return parse_invalid<upgrade_request>("wrong_path");
    path_early = path.substr(rules.path.size());
    // Anything but base64url (RawURLEncoding, as v2fly writes it) after the path is another
    // path, not early data.
    for (char c : path_early)
      if (b64_value(c) < 0 || c == '+' || c == '/') return parse_invalid<upgrade_request>("wrong_path");
  }
  if (const auto host = req.find("Host")) out.host = std::string(*host);
  if (!rules.host.empty() && !http::iequals(host_part(out.host), rules.host))
    return parse_invalid<upgrade_request>("wrong_host");
  const auto upgrade = req.find("Upgrade");
  const auto connection = req.find("Connection");
  if (!upgrade || !lists_token(*upgrade, "websocket") || !connection || !lists_token(*connection, "upgrade"))
    return parse_invalid<upgrade_request>("no_upgrade");
  if (rules.kind == upgrade_kind::websocket) {
    const auto version = req.find("Sec-WebSocket-Version");
    if (!version || *version != "13") return parse_invalid<upgrade_request>("bad_websocket_version");
    const auto key = req.find("Sec-WebSocket-Key");
    const auto nonce = key ? base64_decode(*key) : std::nullopt;
    if (!nonce || nonce->size() != 16) return parse_invalid<upgrade_request>("bad_websocket_key");
    out.key = std::string(*key);
  }
  const std::string_view ed_header =
      rules.early_data_header.empty() ? std::string_view("Sec-WebSocket-Protocol") : rules.early_data_header;
  const auto ed = req.find(ed_header);
  const bool header_ed = ed && !ed->empty() && rules.max_early_data > 0;
  if (!path_early.empty() && header_ed) return parse_invalid<upgrade_request>("bad_early_data");  // two places
  // A Sec-WebSocket-Protocol on a listener without early data is a subprotocol offer, ignored (none
  // is chosen); a configured early-data header there is early data this listener refuses.
  if (ed && !ed->empty() && rules.max_early_data == 0 && !rules.early_data_header.empty())
    return parse_invalid<upgrade_request>("early_data_too_long");
  if (header_ed) {
    if (const auto why = take_early_data(*ed, rules.max_early_data, out.early_data); !why.empty())
      return parse_invalid<upgrade_request>(why);
    if (http::iequals(ed_header, "Sec-WebSocket-Protocol")) out.protocol = std::string(*ed);
  } else if (!path_early.empty()) {
    if (const auto why = take_early_data(path_early, rules.max_early_data, out.early_data); !why.empty())
      return parse_invalid<upgrade_request>(why);
  }
  parse_result<upgrade_request> r;
  r.status = parse_status::complete;
  r.value = std::move(out);
  r.consumed = head.consumed;
  return r;
}

int reject_status(std::string_view reason) {
  if (reason == "wrong_path" || reason == "wrong_host") return 404;
  if (reason == "bad_method") return 405;
  if (reason == "bad_websocket_version" || reason == "no_upgrade") return 426;
  if (reason == "upgrade_head_too_large") return 431;
  return 400;
}

std::string format_reject_response(std::string_view reason) {
  const int status = reject_status(reason);
  std::string_view text = "Bad Request";
  if (status == 404) text = "Not Found";
  if (status == 405) text = "Method Not Allowed";
  if (status == 426) text = "Upgrade Required";
  if (status == 431) text = "Request Header Fields Too Large";
  std::string body(reason);
  body += '\n';
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(text) + "\r\n";
  if (status == 426) out += "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n";
  if (status == 405) out += "Allow: GET\r\n";
  out += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  return out + body;
}

std::string format_upgrade_response(const upgrade_request& req, upgrade_kind kind) {
  std::string out = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
  if (kind == upgrade_kind::websocket) {
    out += "Sec-WebSocket-Accept: " + accept_key(req.key) + "\r\n";
    if (!req.protocol.empty()) out += "Sec-WebSocket-Protocol: " + req.protocol + "\r\n";
  }
  return out + "\r\n";
}

std::string format_upgrade_request(const upgrade_request_spec& spec) {
  std::string path(spec.path.empty() ? "/" : spec.path);
  std::string out = "GET " + path + " HTTP/1.1\r\nHost: " + std::string(spec.host) +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
  if (spec.kind == upgrade_kind::websocket)
    out += "Sec-WebSocket-Key: " + std::string(spec.key) + "\r\nSec-WebSocket-Version: 13\r\n";
  if (!spec.early_data.empty()) {
    const std::string_view name =
        spec.early_data_header.empty() ? std::string_view("Sec-WebSocket-Protocol") : spec.early_data_header;
    out += std::string(name) + ": " + base64_encode(spec.early_data, true) + "\r\n";
  }
  return out + "\r\n";
}

parse_result<int> parse_upgrade_response(std::string_view buffer, upgrade_kind kind, std::string_view key) {
  const auto head = http::parse_response(buffer);
  if (head.need_more()) return {};
  if (head.invalid()) return parse_invalid<int>("bad_upgrade_response");
  if (head.value.status != 101) return parse_invalid<int>("upgrade_refused");
  const auto upgrade = head.value.find("Upgrade");
  if (!upgrade || !lists_token(*upgrade, "websocket")) return parse_invalid<int>("bad_upgrade_response");
  if (kind == upgrade_kind::websocket) {
    const auto accept = head.value.find("Sec-WebSocket-Accept");
    if (!accept || *accept != accept_key(key)) return parse_invalid<int>("bad_accept");
  }
  parse_result<int> r;
  r.status = parse_status::complete;
  r.value = 101;
  r.consumed = head.consumed;
  return r;
}

}  // namespace vlessbench::ws
