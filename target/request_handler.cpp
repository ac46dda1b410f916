#include "target/request_handler.hpp"

#include <charconv>

namespace vlessbench::target {
namespace {

// Parses a path segment that must be all digits (no sign, no spaces) into value <= max.
bool parse_count(std::string_view s, std::uint64_t max, std::uint64_t& value) {
  if (s.empty() || s.size() > 20) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc{} && p == s.data() + s.size() && value <= max;
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

}  // namespace

std::string_view status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

response_plan error_response(int status, std::string_view why) {
  response_plan p;
  p.status = status;
  p.body = std::string(why) + "\n";
  return p;
}

response_plan plan_response(const http::request& req) {
  const std::string_view path = path_of(req.target);
  const bool get = req.method == "GET";
  const bool head = req.method == "HEAD";
  response_plan p;
  p.head_only = head;

  if (path == "/") {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    p.body = "vlessbench target\n";
    return p;
  }
  if (path == "/generate_204") {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    p.status = 204;
    return p;
  }
  if (path.starts_with("/bytes/")) {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    std::uint64_t n = 0;
    if (!parse_count(path.substr(7), max_generated_bytes, n))
      return error_response(400, "bytes: N must be 0..68719476736");
    p.generated_bytes = n;
    p.content_type = "application/octet-stream";
    return p;
  }
  if (path.starts_with("/delay/")) {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    std::uint64_t ms = 0;
    if (!parse_count(path.substr(7), max_delay_ms, ms))
      return error_response(400, "delay: MS must be 0..60000");
    p.delay = std::chrono::milliseconds(ms);
    p.body = "delayed " + std::to_string(ms) + " ms\n";
    return p;
  }
  if (path == "/sink") {
    if (req.method != "POST") return error_response(405, "use POST");
    p.sink = true;
    return p;
  }
  return error_response(404, "no such endpoint");
}

std::string format_head(const response_plan& plan, std::uint64_t content_length,
                        std::string_view route_value, std::string_view timing, bool keep_alive) {
  std::string h;
  h.reserve(256);
  h += "HTTP/1.1 ";
  h += std::to_string(plan.status);
  h += ' ';
  h += status_text(plan.status);
  h += "\r\nServer: vlessbenchd\r\n";
  if (plan.status != 204) {
    h += "Content-Type: ";
    h += plan.content_type;
    h += "\r\nContent-Length: ";
    h += std::to_string(content_length);
    h += "\r\n";
  }
  h += "Cache-Control: no-store\r\nX-Vlessbench-Route: ";
  h += route_value;
  h += "\r\n";
  if (!timing.empty()) {
    h += "Server-Timing: ";
    h += timing;
    h += "\r\n";
  }
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

}  // namespace vlessbench::target
