#include "core/wire/log_query.hpp"

#include <algorithm>
#include <array>

namespace vlessbench {
namespace {

constexpr std::array<std::string_view, 3> label_less_events = {"banner.connection", "udp.packet", "dns.query"};
constexpr std::size_t max_run_id = 64;
constexpr std::size_t second_length = 19;  // YYYY-MM-DDTHH:MM:SS

bool run_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// YYYY-MM-DDTHH:MM:SSZ, digits where digits go (the ranges are the clock's business).
bool valid_second(std::string_view s) {
  constexpr std::string_view shape = "dddd-dd-ddTdd:dd:ddZ";
  if (s.size() != shape.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i]) return false;
  return true;
}

// The value of "key":"..." at the start of the line's object, if the line begins with it where
// the daemon's writer puts it (event first, ts second).
std::string_view leading_string(std::string_view& rest, std::string_view key) {
  const std::string opening = "\"" + std::string(key) + "\":\"";
  if (!rest.starts_with(opening)) return {};
  rest.remove_prefix(opening.size());
  const auto end = rest.find('"');
  if (end == std::string_view::npos) return {};
  const auto value = rest.substr(0, end);
  rest.remove_prefix(end + 1);
  if (!rest.empty() && rest.front() == ',') rest.remove_prefix(1);
  return value;
}

}  // namespace

bool log_query_event_allowed(std::string_view event) {
  return std::ranges::find(label_less_events, event) != label_less_events.end();
}

parse_result<log_query> parse_log_query(std::string_view query) {
  parse_result<log_query> r;
  auto invalid = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  bool seen_run = false, seen_events = false, seen_since = false;
  std::string_view rest = query;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos) return invalid("a parameter without '='");
    const auto key = part.substr(0, eq);
    const auto value = part.substr(eq + 1);
    if (key == "token") continue;
    if (key == "run") {
      if (seen_run) return invalid("run given twice");
      seen_run = true;
      if (value.empty() || value.size() > max_run_id || !std::ranges::all_of(value, run_id_char))
        return invalid("run must be a run id: 1 to 64 of A-Z a-z 0-9 . _ -");
      r.value.run = std::string(value);
    } else if (key == "events") {
      if (seen_events) return invalid("events given twice");
      seen_events = true;
      std::string_view list = value;
      while (true) {
        const auto comma = list.find(',');
        const auto e = list.substr(0, comma);
        if (!log_query_event_allowed(e)) return invalid("events: only banner.connection, udp.packet, dns.query");
        if (std::ranges::find(r.value.events, e) == r.value.events.end()) r.value.events.emplace_back(e);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    } else if (key == "since") {
      if (seen_since) return invalid("since given twice");
      seen_since = true;
      if (!valid_second(value)) return invalid("since must be a UTC second: YYYY-MM-DDTHH:MM:SSZ");
      r.value.since = std::string(value);
    } else {
      return invalid("unknown parameter (run, events, since, token)");
    }
  }
  if (!seen_run) return invalid("run=ID is required");
  if (seen_events != seen_since) return invalid("events and since go together");
  r.status = parse_status::complete;
  r.consumed = query.size();
  return r;
}

std::string format_log_query(const log_query& q) {
  std::string out = "run=" + q.run;
  if (!q.events.empty()) {
    out += "&events=";
    for (std::size_t i = 0; i < q.events.size(); ++i) out += (i ? "," : "") + q.events[i];
    out += "&since=" + q.since;
  }
  return out;
}

bool log_line_selected(const log_query& q, std::string_view line) {
  if (line.find("\"run\":\"" + q.run + "\"") != std::string_view::npos) return true;
  if (q.events.empty() || !line.starts_with('{')) return false;
  std::string_view rest = line.substr(1);
  const auto event = leading_string(rest, "event");
  if (std::ranges::find(q.events, event) == q.events.end()) return false;
  const auto ts = leading_string(rest, "ts");
  // The daemon's ts has microseconds (…:SS.ffffffZ): compare to the second.
  return ts.size() >= second_length &&
         ts.substr(0, second_length) >= std::string_view(q.since).substr(0, second_length);
}

}  // namespace vlessbench
