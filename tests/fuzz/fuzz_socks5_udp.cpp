// libFuzzer target for the SOCKS5 UDP datagram header (core/wire/socks5_udp.hpp).
// Invariants: never need_more; consumed never exceeds the input; an invalid
// verdict has a reason; a parsed header re-encodes (from its host, port and
// payload) to the bytes it was parsed from, except that an address-shaped
// domain travels as an address.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/wire/socks5_udp.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = socks5::parse_udp_datagram(input);
  if (r.need_more()) __builtin_trap();
  if (r.consumed > size) __builtin_trap();
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (r.value.data.size() != size - r.consumed) __builtin_trap();
  std::string again;
  try {
    again = socks5::encode_udp_datagram(r.value.host, r.value.port, r.value.data);
  } catch (const std::invalid_argument&) {
    __builtin_trap();  // a parsed host is 1-255 bytes
  }
  const auto back = socks5::parse_udp_datagram(again);
  if (!back.complete() || back.value.port != r.value.port || back.value.data != r.value.data) __builtin_trap();
  // A domain that reads as an IP literal is re-encoded as an address: compare
  // only the rest.
  if (static_cast<unsigned char>(input[3]) != 3 && again != input) __builtin_trap();
  return 0;
}
