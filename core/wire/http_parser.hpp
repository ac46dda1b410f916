#pragma once
// HTTP/1.1 message heads, parsed incrementally from bytes (no sockets). Used by the target
// (requests) and the runner (responses). Call again with the whole buffer seen so far; the parser
// keeps no state between calls, so splitting input at any byte gives the same result.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench::http {

inline constexpr std::size_t max_head_bytes = 16 * 1024;  // larger heads: 431 (requests)

struct header {
  std::string name;   // as received
  std::string value;  // leading/trailing whitespace trimmed
};

struct request {
  std::string method;
  std::string target;     // request-target as sent, e.g. "/bytes/100"
  int version_minor = 1;  // HTTP/1.x
  std::vector<header> headers;
  std::uint64_t content_length = 0;  // 0 when absent
  bool keep_alive = true;            // from version and Connection
  bool chunked = false;              // Transfer-Encoding ending in chunked (body_framing::chunked_too only)
  // Case-insensitive lookup of the first header with this name.
  std::optional<std::string_view> find(std::string_view name) const;
};

// What request bodies the caller can read: Content-Length only (the target: Transfer-Encoding is
// refused outright), or chunked too (XHTTP's streaming uplink; Content-Length with
// Transfer-Encoding, or a coding other than chunked last, is still refused).
enum class body_framing { content_length_only, chunked_too };

// Reasons are static strings such as "bad request line", "header too large" (the caller answers
// 431 for that one, 400 for the others), "transfer-encoding not supported",
// "conflicting content-length", "bad content-length".
parse_result<request> parse_request(std::string_view buffer, body_framing framing = body_framing::content_length_only);

struct response {
  int status = 0;
  std::string reason;
  int version_minor = 1;
  std::vector<header> headers;
  std::optional<std::uint64_t> content_length;  // absent: read to close (or none for 204/304/HEAD)
  bool chunked = false;
  bool keep_alive = true;
  std::optional<std::string_view> find(std::string_view name) const;
};
parse_result<response> parse_response(std::string_view buffer);

bool iequals(std::string_view a, std::string_view b);

}  // namespace vlessbench::http
