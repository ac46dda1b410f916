// libFuzzer target for vless:// share links. Invariants checked: a refusal always says why; an
// accepted link formats to a canonical link that parses back to the same fields, and formatting
// that again gives the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/share_link.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string reason;
  const auto link = parse_share_link(input, reason);
  if (!link) {
    if (reason.empty()) __builtin_trap();
    return 0;
  }
  if (!reason.empty()) __builtin_trap();

  const std::string text = format_share_link(*link);
  std::string reason2;
  const auto back = parse_share_link(text, reason2);
  if (!back || !(*back == *link)) __builtin_trap();
  if (format_share_link(*back) != text) __builtin_trap();
  return 0;
}
