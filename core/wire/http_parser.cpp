#include "core/wire/http_parser.hpp"

#include <algorithm>

namespace vlessbench::http {

namespace {

constexpr std::string_view bad_request_line = "bad request line";
constexpr std::string_view bad_status_line = "bad status line";
constexpr std::string_view bad_version = "bad version";
constexpr std::string_view bad_header = "bad header";
constexpr std::string_view too_many_headers = "too many headers";
constexpr std::string_view header_too_large = "header too large";
constexpr std::string_view conflicting_content_length = "conflicting content-length";
constexpr std::string_view bad_content_length = "bad content-length";
constexpr std::string_view te_not_supported = "transfer-encoding not supported";
constexpr std::string_view te_with_content_length = "content-length with transfer-encoding";

constexpr std::size_t max_headers = 100;

constexpr bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
constexpr bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_vchar(unsigned char c) { return c >= 0x21 && c <= 0x7e; }
constexpr bool is_obs_text(unsigned char c) { return c >= 0x80; }
constexpr bool is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

// RFC 9110 §5.6.2 tchar.
constexpr bool is_tchar(unsigned char c) {
  if (is_digit(c) || is_alpha(c)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// Field values and reason phrases: VCHAR, obs-text, SP and HTAB; every other control byte
// (CR, LF and NUL included) is what splitting and smuggling attacks are made of.
bool is_field_text(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return is_vchar(c) || is_obs_text(c) || is_ows(c);
  });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Calls fn for every non-empty element of a comma-separated list, trimmed.
template <class Fn>
void for_each_element(std::string_view list, Fn&& fn) {
  while (true) {
    const auto comma = list.find(',');
    if (const auto element = trim_ows(list.substr(0, comma)); !element.empty()) fn(element);
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

// 1*DIGIT, at most 2^63; no list form, no sign, no whitespace inside.
std::optional<std::uint64_t> parse_content_length(std::string_view v) {
  if (v.empty()) return std::nullopt;
  constexpr std::uint64_t limit = std::uint64_t{1} << 63;
  std::uint64_t n = 0;
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (!is_digit(c)) return std::nullopt;
    const std::uint64_t d = c - '0';
    if (n > (limit - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  return n;
}

// "HTTP/1.0" → 0, "HTTP/1.1" → 1; another well-formed HTTP/d.d → -1 (bad version);
// anything else → -2 (not a version at all).
int parse_version(std::string_view v) {
  if (v == "HTTP/1.1") return 1;
  if (v == "HTTP/1.0") return 0;
  if (v.size() == 8 && v.substr(0, 5) == "HTTP/" && is_digit(static_cast<unsigned char>(v[5])) && v[6] == '.' &&
      is_digit(static_cast<unsigned char>(v[7])))
    return -1;
  return -2;
}

// What the field lines say about framing and persistence, shared by requests and responses.
struct field_summary {
  std::size_t count = 0;
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  bool has_transfer_encoding = false;
  bool last_coding_chunked = false;
  bool connection_close = false;
  bool connection_keep_alive = false;

  bool keep_alive(int version_minor) const {
    if (connection_close) return false;
    return version_minor >= 1 || connection_keep_alive;
  }
};

// One field line (without its CRLF). Returns an empty string_view when it is good.
std::string_view take_field(std::string_view line, std::vector<header>& headers, field_summary& fields) {
  if (++fields.count > max_headers) return too_many_headers;
  // A leading SP/HTAB is obs-fold (or whitespace before the first field): both are rejected
  // because intermediaries disagree on how to unfold them.
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return bad_header;
  const auto name = line.substr(0, colon);
  const auto value = trim_ows(line.substr(colon + 1));
  // is_token also rejects whitespace between name and colon (RFC 9112 §5.1 requires a 400).
  if (!is_token(name) || !is_field_text(value)) return bad_header;

  if (iequals(name, "content-length")) {
    if (fields.has_content_length) return conflicting_content_length;
    const auto n = parse_content_length(value);
    if (!n) return bad_content_length;
    fields.has_content_length = true;
    fields.content_length = *n;
  } else if (iequals(name, "transfer-encoding")) {
    fields.has_transfer_encoding = true;
    // Across several fields the codings concatenate, so the last element seen is the last coding.
    for_each_element(value, [&](std::string_view coding) { fields.last_coding_chunked = iequals(coding, "chunked"); });
  } else if (iequals(name, "connection")) {
    for_each_element(value, [&](std::string_view option) {
      if (iequals(option, "close")) fields.connection_close = true;
      if (iequals(option, "keep-alive")) fields.connection_keep_alive = true;
    });
  }
  headers.push_back(header{std::string(name), std::string(value)});
  return {};
}

struct head_outcome {
  parse_status status = parse_status::need_more;
  std::size_t consumed = 0;
  std::string_view reason{};
};

// Walks the lines of a head (start line, field lines, empty line; each ending in CRLF) and hands
// each complete line to visit(line, is_start_line) as soon as it is there, so a bad line is
// reported without waiting for the rest. Only the first max_head_bytes are looked at: the result
// for a prefix never contradicts the result for the whole buffer.
template <class Visit>
head_outcome scan_head(std::string_view buffer, std::string_view bad_start_reason, Visit&& visit) {
  const auto window = buffer.substr(0, max_head_bytes);
  std::size_t pos = 0;
  for (bool start = true;; start = false) {
    const auto lf = window.find('\n', pos);
    if (lf == std::string_view::npos) break;
    const auto line_reason = start ? bad_start_reason : bad_header;
    // Bare LF is refused: accepting it where a peer does not is a request-smuggling shape.
    if (lf == pos || window[lf - 1] != '\r') return {parse_status::invalid, 0, line_reason};
    const auto line = window.substr(pos, lf - 1 - pos);
    pos = lf + 1;
    if (line.empty()) {
      if (start) return {parse_status::invalid, 0, line_reason};
      return {parse_status::complete, pos, {}};
    }
    if (const auto reason = visit(line, start); !reason.empty()) return {parse_status::invalid, 0, reason};
  }
  // At max_head_bytes without the end, the head can only end past the limit.
  if (buffer.size() >= max_head_bytes) return {parse_status::invalid, 0, header_too_large};
  return {};
}

bool valid_request_target(std::string_view method, std::string_view target) {
  if (target.empty()) return false;
  const bool printable = std::all_of(target.begin(), target.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return is_vchar(c) && c != '#';  // a fragment is never sent (RFC 9112 §3.2)
  });
  if (!printable) return false;
  if (target.front() == '/') return true;
  if (target == "*") return method == "OPTIONS";  // asterisk-form exists only for OPTIONS
  constexpr std::string_view scheme = "http://";
  return target.size() > scheme.size() && iequals(target.substr(0, scheme.size()), scheme) &&
         target[scheme.size()] != '/';  // absolute-form needs a non-empty authority
}

std::string_view take_request_line(std::string_view line, request& req) {
  const auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return bad_request_line;
  const auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return bad_request_line;
  const auto method = line.substr(0, sp1);
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!is_token(method) || !valid_request_target(method, target)) return bad_request_line;
  const int minor = parse_version(line.substr(sp2 + 1));
  if (minor == -1) return bad_version;
  if (minor < 0) return bad_request_line;
  req.method = method;
  req.target = target;
  req.version_minor = minor;
  return {};
}

std::string_view take_status_line(std::string_view line, response& res) {
  const auto sp = line.find(' ');
  if (sp == std::string_view::npos) return bad_status_line;
  const int minor = parse_version(line.substr(0, sp));
  if (minor == -1) return bad_version;
  if (minor < 0) return bad_status_line;
  const auto rest = line.substr(sp + 1);
  if (rest.size() < 4 || rest[3] != ' ') return bad_status_line;
  int status = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto c = static_cast<unsigned char>(rest[i]);
    if (!is_digit(c)) return bad_status_line;
    status = status * 10 + (c - '0');
  }
  // RFC 9110 §15: codes outside 100..599 are invalid.
  if (status < 100 || status > 599) return bad_status_line;
  const auto reason = rest.substr(4);
  if (!is_field_text(reason)) return bad_status_line;
  res.version_minor = minor;
  res.status = status;
  res.reason = reason;
  return {};
}

template <class T>
parse_result<T> finish(const head_outcome& outcome, T&& value) {
  parse_result<T> result;
  result.status = outcome.status;
  result.reason = outcome.reason;
  if (outcome.status == parse_status::complete) {
    result.consumed = outcome.consumed;
    result.value = std::forward<T>(value);
  }
  return result;
}

template <class Message>
std::optional<std::string_view> find_header(const Message& m, std::string_view name) {
  for (const auto& h : m.headers)
    if (iequals(h.name, name)) return std::string_view(h.value);
  return std::nullopt;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  const auto lower = [](unsigned char c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) {
           return lower(static_cast<unsigned char>(x)) == lower(static_cast<unsigned char>(y));
         });
}

std::optional<std::string_view> request::find(std::string_view name) const { return find_header(*this, name); }

std::optional<std::string_view> response::find(std::string_view name) const { return find_header(*this, name); }

parse_result<request> parse_request(std::string_view buffer, body_framing framing) {
  request req;
  field_summary fields;
  const auto outcome = scan_head(buffer, bad_request_line, [&](std::string_view line, bool start) {
    if (start) return take_request_line(line, req);
    if (auto reason = take_field(line, req.headers, fields); !reason.empty()) return reason;
    // The target has no chunked decoder; refusing TE outright also closes the CL+TE smuggling door.
    if (fields.has_transfer_encoding && framing == body_framing::content_length_only) return te_not_supported;
    if (fields.has_transfer_encoding && fields.has_content_length) return te_with_content_length;
    return std::string_view{};
  });
  if (outcome.status == parse_status::complete && fields.has_transfer_encoding && !fields.last_coding_chunked)
    return finish(head_outcome{parse_status::invalid, 0, te_not_supported}, std::move(req));
  req.chunked = fields.has_transfer_encoding;
  req.content_length = fields.content_length;
  req.keep_alive = fields.keep_alive(req.version_minor);
  return finish(outcome, std::move(req));
}

parse_result<response> parse_response(std::string_view buffer) {
  response res;
  field_summary fields;
  const auto outcome = scan_head(buffer, bad_status_line, [&](std::string_view line, bool start) {
    if (start) return take_status_line(line, res);
    if (auto reason = take_field(line, res.headers, fields); !reason.empty()) return reason;
    // RFC 9112 §6.3: both framings at once ought to be handled as an error.
    if (fields.has_transfer_encoding && fields.has_content_length) return te_with_content_length;
    return std::string_view{};
  });
  if (fields.has_content_length) res.content_length = fields.content_length;
  res.chunked = fields.has_transfer_encoding && fields.last_coding_chunked;
  res.keep_alive = fields.keep_alive(res.version_minor);
  return finish(outcome, std::move(res));
}

}  // namespace vlessbench::http
