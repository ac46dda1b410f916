// libFuzzer target for the VLESS request/response header parsers. Invariants checked:
// consumed never exceeds the input; a complete header re-encodes to bytes that parse to the same
// value, and the header alone (without payload) is complete with the same length; the response
// parser never claims more than it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/vless_codec.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto r = vless::parse_request(input);
  if (r.consumed > size) __builtin_trap();
  if (r.invalid() && r.reason.empty()) __builtin_trap();
  if (!r.complete() && r.consumed != 0) __builtin_trap();
  if (r.complete()) {
    const auto header_only = vless::parse_request(input.substr(0, r.consumed));
    if (!header_only.complete() || header_only.consumed != r.consumed || !(header_only.value == r.value))
      __builtin_trap();

    const std::string wire = vless::encode_request(r.value);  // must not throw on parsed values
    const auto again = vless::parse_request(wire);
    if (!again.complete() || again.consumed != wire.size() || !(again.value == r.value)) __builtin_trap();
    // Encoding is canonical, so it can only be as long as or shorter than what was parsed.
    if (wire.size() > r.consumed) __builtin_trap();
  }

  const auto resp = vless::parse_response(input);
  if (resp.consumed > size) __builtin_trap();
  if (resp.complete() && resp.consumed != 2 + resp.value) __builtin_trap();
  return 0;
}
