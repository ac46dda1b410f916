// libFuzzer target for vless:// share links. Invariants checked: a refusal always says why; an
// accepted link formats to a canonical link that parses back to the same fields, and formatting
// that again gives the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/share_link.hpp"

using namespace vlessbench;

namespace {

bool same(const share_link& a, const share_link& b) {
  return a.uuid == b.uuid && a.host == b.host && a.port == b.port && a.security == b.security &&
         a.sni == b.sni && a.allow_insecure == b.allow_insecure && a.flow == b.flow &&
         a.type == b.type && a.name == b.name && a.path == b.path && a.http_host == b.http_host &&
         a.early_data == b.early_data;
}

}  // namespace

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
  if (!back || !same(*back, *link)) __builtin_trap();
  if (format_share_link(*back) != text) __builtin_trap();
  return 0;
}
