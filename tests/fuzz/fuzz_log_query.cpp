// libFuzzer target for GET /api/log's query and line selector (core/wire/log_query.hpp). Input: a
// query, then '\n' and an access-log line. Invariants: a refusal says why; an accepted query
// formats to a query that parses to the same value; a line holding "run":"ID" for the run is
// selected; the selector never reads outside the line (ASan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/log_query.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  const auto query = input.substr(0, nl);
  const auto line = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
  const auto r = parse_log_query(query);
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (!r.complete() || r.value.run.empty()) __builtin_trap();
  const auto again = parse_log_query(format_log_query(r.value));
  if (!again.complete() || again.value.run != r.value.run || again.value.events != r.value.events ||
      again.value.since != r.value.since)
    __builtin_trap();
  const bool selected = log_line_selected(r.value, line);
  if (line.find("\"run\":\"" + r.value.run + "\"") != std::string_view::npos && !selected) __builtin_trap();
  return 0;
}
