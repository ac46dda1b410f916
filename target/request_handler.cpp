#include "target/request_handler.hpp"

#include <charconv>
#include <optional>

#include "core/log/access_events.hpp"
#include "core/wire/probe_result.hpp"
#include "target/probe_page.hpp"
#include "target/probe_runs.hpp"

namespace vlessbench::target {
namespace {

// Parses a path segment that must be all digits (no sign, no spaces) into value <= max.
bool parse_count(std::string_view s, std::uint64_t max, std::uint64_t& value) {
  if (s.empty() || s.size() > 20) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc{} && p == s.data() + s.size() && value <= max;
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// The value of query parameter `name` (the first one), if present.
std::optional<std::string_view> query_param(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    const auto eq = item.find('=');
    if (item.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return std::nullopt;
}

// The probe's sample flags, on the endpoints it samples.
void probe_flags(const http::request& req, response_plan& p) {
  p.close = query_param(req.target, "close") == std::string_view("1");
  p.cors = query_param(req.target, "probe").has_value();
}

// A browser asks for a page (Accept: text/html,...); the runner, curl and the probe's fetch() do not
// (no Accept, */*), so what they measure on / stays the plain text body.
bool wants_html(const http::request& req) {
  const auto accept = req.find("Accept");
  if (!accept) return false;
  constexpr std::string_view html = "text/html";
  const std::string_view a = *accept;
  for (std::size_t i = 0; i + html.size() <= a.size(); ++i)
    if (http::iequals(a.substr(i, html.size()), html)) return true;
  return false;
}

}  // namespace

std::string_view status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
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
    probe_flags(req, p);
    if (wants_html(req) && !p.cors) {
      p.index_page = true;  // the body comes from index_page(ctx.index(...)): the daemon's nodes
      p.content_type = "text/html; charset=utf-8";
      return p;
    }
    p.body = "vlessbench target\n";
    return p;
  }
  if (path == "/generate_204") {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    p.status = 204;
    probe_flags(req, p);
    return p;
  }
  if (path == "/probe") {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    p.probe_page = true;  // the body, with its run id and token, comes from probe_page(run, token)
    p.content_type = "text/html; charset=utf-8";
    return p;
  }
  if (path == "/probe/token") {
    if (!get && !head) return error_response(405, "use GET or HEAD");
    p.probe_token = true;
    p.content_type = "application/json";
    return p;
  }
  if (path == "/probe/result") {
    if (req.method != "POST") return error_response(405, "use POST");
    if (req.content_length > probe_max_body) {
      auto e = error_response(413, "probe result too large");
      e.note = "probe result too large";
      e.close = true;  // the body is not read: its framing is lost
      return e;
    }
    p.probe_result = true;
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
    if (!parse_count(path.substr(7), max_delay_ms, ms)) return error_response(400, "delay: MS must be 0..60000");
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

std::string format_head(const response_plan& plan, std::uint64_t content_length, std::string_view route_value,
                        std::string_view timing, bool keep_alive, std::string_view node) {
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
  if (plan.index_page) {
    // The page carries credentials (share links): nothing but its own inline style runs or loads,
    // and no other site may frame it or learn its address from a Referer.
    h += "Vary: Accept\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
         "form-action 'none'; frame-ancestors 'none'\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: "
         "no-referrer\r\n";
  }
  if (plan.cors) {
    // The probe's control samples come from another origin: let it read the route and phases.
    h += "Access-Control-Allow-Origin: *\r\nAccess-Control-Expose-Headers: X-Vlessbench-Route, Server-Timing, "
         "X-Vlessbench-Node\r\nTiming-Allow-Origin: *\r\n";
    if (!node.empty()) {
      h += "X-Vlessbench-Node: ";
      h += node;
      h += "\r\n";
    }
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

probe_post_outcome handle_probe_result(std::string_view body, std::string_view user_agent, std::string_view listener,
                                       std::string_view peer, const route_info* route, probe_runs& runs,
                                       std::string_view token, std::string_view client) {
  probe_post_outcome out;
  auto parsed = parse_probe_result(body);
  if (!parsed.complete()) {
    out.plan = error_response(400, std::string("probe result: ") + std::string(parsed.reason));
    out.plan.note = parsed.reason;
    return out;
  }
  const std::string_view refused = runs.redeem(parsed.value.run, client, token, std::chrono::steady_clock::now());
  if (!refused.empty()) {
    out.plan = error_response(403, std::string("probe result refused: ") + std::string(refused) +
                                       " (a result needs the token the daemon gave this page load; reload /probe)");
    out.plan.note = refused;
    return out;
  }
  runs.verify(parsed.value);
  const probe_summary summary = summarize_probe(parsed.value);
  out.log_line = format_event(probe_run_event{.listener = listener,
                                              .peer = peer,
                                              .route = route,
                                              .user_agent = user_agent,
                                              .result = &parsed.value,
                                              .summary = &summary});
  out.record = make_probe_record(probe_run_event{.listener = listener,
                                                 .peer = peer,
                                                 .route = route,
                                                 .user_agent = user_agent,
                                                 .result = &parsed.value,
                                                 .summary = &summary});
  out.plan.body = "logged run " + parsed.value.run + ": " + std::string(summary.verdict) + "\n";
  return out;
}

std::optional<probe_sample_ref> probe_sample_of(const http::request& req) {
  const auto path = path_of(req.target);
  if (path != "/" && path != "/generate_204") return std::nullopt;
  const auto run = query_param(req.target, "probe");
  const auto seq = query_param(req.target, "seq");
  std::uint64_t n = 0;
  if (!run || run->empty() || !seq || !parse_count(*seq, probe_max_count * 8, n)) return std::nullopt;
  return probe_sample_ref{*run, n};
}

std::string probe_client(const route_info* route, std::string_view peer) {
  std::string_view ep = route ? std::string_view(route->client) : peer;
  const auto colon = ep.rfind(':');
  if (colon == std::string_view::npos) return std::string(ep);
  ep = ep.substr(0, colon);
  if (ep.size() >= 2 && ep.front() == '[' && ep.back() == ']') ep = ep.substr(1, ep.size() - 2);
  return std::string(ep);
}

}  // namespace vlessbench::target
