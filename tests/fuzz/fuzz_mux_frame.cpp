// libFuzzer target for the Mux.Cool frame parser. Invariants: consumed never exceeds the input;
// an invalid result has a reason; a complete frame re-encodes to exactly the bytes it was read
// from (the layout has one encoding); every proper prefix of a complete frame is need_more
// (a frame is never refused for being cut short); data lies inside the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/mux_frame.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = mux::parse_mux_frame(input);
  if (r.consumed > size) __builtin_trap();
  if (r.invalid() && r.reason.empty()) __builtin_trap();
  if (!r.complete()) return 0;
  const auto& f = r.value;
  if (!f.data.empty() && (f.data.data() < input.data() || f.data.data() + f.data.size() > input.data() + size))
    __builtin_trap();
  std::string again;
  mux::encode_mux_frame(again, f);
  if (again != input.substr(0, r.consumed)) __builtin_trap();
  if (f.dest && mux::format_target(*f.dest).empty()) __builtin_trap();
  for (std::size_t n = r.consumed; n-- > 0;)
    if (!mux::parse_mux_frame(input.substr(0, n)).need_more()) __builtin_trap();
  return 0;
}
