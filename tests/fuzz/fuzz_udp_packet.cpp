// libFuzzer target for the VLESS UDP packet framing (core/wire/udp_framing.hpp).
// Invariants: consumed never exceeds the input; a complete packet re-encodes to
// exactly the bytes it consumed; parsing the stream packet by packet, whole or
// fed in two parts, gives the same datagrams and verdict; an invalid verdict
// always has a reason.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/udp_framing.hpp"

using namespace vlessbench;

namespace {

constexpr std::size_t cap = 1024;  // small, so that the fuzzer reaches the cap too

struct outcome {
  std::string datagrams;
  std::string_view reason;
};

outcome run(std::string_view input, std::size_t split) {
  outcome o;
  std::string buf;
  for (std::string_view part : {input.substr(0, split), input.substr(split)}) {
    buf.append(part);
    for (;;) {
      const auto r = vless::parse_udp_packet(buf, cap);
      if (r.consumed > buf.size()) __builtin_trap();
      if (r.invalid()) {
        if (r.reason.empty()) __builtin_trap();
        o.reason = r.reason;
        return o;
      }
      if (r.need_more()) break;
      if (r.value.size() > cap) __builtin_trap();
      std::string again;
      vless::encode_udp_packet(again, r.value);
      if (again != std::string_view(buf).substr(0, r.consumed)) __builtin_trap();
      o.datagrams += std::to_string(r.value.size()) + ":";
      o.datagrams.append(r.value);
      buf.erase(0, r.consumed);
    }
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const outcome whole = run(input, size);
  const outcome split = run(input, size / 2);
  if (whole.reason != split.reason || whole.datagrams != split.datagrams) __builtin_trap();
  return 0;
}
