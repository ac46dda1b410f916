// libFuzzer target for HTTP Host header values (the admin listener's DNS-rebinding check).
// Invariants checked: a refusal always says why; an accepted value gives a non-empty host in
// normal form (lower case, no trailing dot), which normalize_host_name leaves as it is; an IP
// literal parses as an address.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/net_address.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string reason;
  const auto h = parse_host_header(input, reason);
  if (!h) {
    if (reason.empty()) __builtin_trap();
    return 0;
  }
  if (h->host.empty() || h->host.back() == '.') __builtin_trap();
  for (char c : h->host)
    if (c >= 'A' && c <= 'Z') __builtin_trap();
  std::string again_reason;
  const auto again =
      normalize_host_name(h->address && h->address->is_v6() ? "[" + h->host + "]" : h->host, again_reason);
  if (!again || *again != h->host) __builtin_trap();
  return 0;
}
