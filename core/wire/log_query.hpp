#pragma once
// GET /api/log's query (docs/dashboard.md, "The run's log lines"): which access-log lines of the
// daemon a runner's `verify --daemon` asks for. A format + parse pair (the runner formats, the
// admin listener parses) and the pure line selector the listener streams with.
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench {

// The most selected bytes one answer carries (the admin listener stops there and says so in its
// log.end line; the runner refuses an answer that runs past it).
inline constexpr std::size_t log_answer_cap = std::size_t{256} << 20;
// The longest line an answer carries: the listener skips longer "lines" of its file, the runner
// refuses an answer with one (it would otherwise hold an endless line in memory).
inline constexpr std::size_t log_line_cap = std::size_t{1} << 20;

struct log_query {
  std::string run;                  // lines whose "run" is this id (http.request of the run)
  std::vector<std::string> events;  // also lines of these label-less events ...
  std::string since;                // ... written at or after this UTC second (YYYY-MM-DDTHH:MM:SSZ)
};

// The events a run's datagram and banner samples are proven by: they carry no run id.
bool log_query_event_allowed(std::string_view event);

// "run=ID[&events=E1,E2&since=TS]"; a token=... parameter (the admin listener's) is skipped.
// Invalid: no run, a run id outside [A-Za-z0-9._-]{1,64}, an event not allowed, a malformed
// since, events without since, an unknown or repeated parameter.
parse_result<log_query> parse_log_query(std::string_view query);
std::string format_log_query(const log_query& q);

// One access-log line (without its '\n'): does the query select it? Lines are the daemon's own
// ({"event":"E","ts":"T",...}); "run" is matched as the exact key-value text, which an escaped
// value inside another field can never form.
bool log_line_selected(const log_query& q, std::string_view line);

}  // namespace vlessbench
