// libFuzzer target for the [[banner]] target's first line
// (core/wire/route_header.hpp). Invariants: a refusal says why; need_more only below
// the cap and without a LF; a complete line consumes through its LF, within the
// cap, and its listener formats back to a line that parses the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/route_header.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = parse_banner_line(input);
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (r.need_more()) {
    if (input.size() >= max_banner_line || input.find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  if (r.consumed == 0 || r.consumed > max_banner_line || input[r.consumed - 1] != '\n') __builtin_trap();
  if (r.value.listener.empty() || r.value.listener.find(' ') != std::string::npos) __builtin_trap();
  // A listener name read back may be longer than any configured one; format_banner_line then
  // cuts the line at the cap (and with it the route): only a line below the cap must read back
  // the same (the fuzzer found a 232-byte name whose "direct" was cut).
  const std::string line = format_banner_line(r.value.listener, nullptr);
  if (line.size() >= max_banner_line) return 0;
  const auto again = parse_banner_line(line);
  if (!again.complete() || again.value.listener != r.value.listener || again.value.route.kind != route_kind::direct)
    __builtin_trap();
  return 0;
}
