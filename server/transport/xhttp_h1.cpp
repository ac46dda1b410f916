#include "server/transport/xhttp_h1.hpp"

#include <random>

namespace vlessbench::xhttp {

std::string padding_header(const transport_spec& t) {
  thread_local std::minstd_rand gen{std::random_device{}()};
  std::uniform_int_distribution<std::uint32_t> pick(t.padding_min, t.padding_max);
  return "X-Padding: " + std::string(pick(gen), 'X') + "\r\n";
}

std::string stream_head(const transport_spec& t, bool event_stream) {
  std::string h =
      "HTTP/1.1 200 OK\r\n"
      "X-Accel-Buffering: no\r\n"
      "Cache-Control: no-store\r\n";
  if (event_stream) h += "Content-Type: text/event-stream\r\n";
  h += "Transfer-Encoding: chunked\r\n";
  h += padding_header(t);
  return h + "\r\n";
}

std::string short_answer(const transport_spec& t, int status, bool keep_alive) {
  std::string_view text = "Bad Request";
  switch (status) {
    case 200: text = "OK"; break;
    case 404: text = "Not Found"; break;
    case 405: text = "Method Not Allowed"; break;
    case 409: text = "Conflict"; break;
    case 413: text = "Content Too Large"; break;
    case 431: text = "Request Header Fields Too Large"; break;
    case 503: text = "Service Unavailable"; break;
    default: break;
  }
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + std::string(text) + "\r\nContent-Length: 0\r\n";
  if (!keep_alive) h += "Connection: close\r\n";
  h += padding_header(t);
  return h + "\r\n";
}

int status_for(std::string_view reason) {
  if (reason == "wrong_path" || reason == "wrong_host") return 404;
  if (reason == "wrong_method") return 405;
  if (reason == "xhttp_duplicate_download" || reason == "xhttp_duplicate_upload" || reason == "xhttp_mixed_upload")
    return 409;
  if (reason == "xhttp_post_too_large") return 413;
  if (reason == "xhttp_too_many_sessions" || reason == "xhttp_session_failed") return 503;
  return 400;
}

bool host_matches(std::string_view header, std::string_view host) {
  // Strip a port: "[v6]:port", "name:port"; a bare v6 literal has several ':'.
  if (!header.empty() && header.front() == '[') {
    const auto close = header.find(']');
    header = header.substr(0, close == std::string_view::npos ? header.size() : close + 1);
  } else if (header.find(':') == header.rfind(':')) {
    header = header.substr(0, header.find(':'));
  }
  return http::iequals(header, host);
}

}  // namespace vlessbench::xhttp
