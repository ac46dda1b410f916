// libFuzzer target for the WebSocket frame parser and decoder. Invariants: consumed never exceeds
// the input; a complete header re-encodes to the same bytes (lengths are minimal, so encoding is
// canonical); decoding the input whole or split at any point gives the same payload, controls
// and verdict; payload never exceeds the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/ws_frame.hpp"

using namespace vlessbench;

namespace {

struct outcome {
  std::string payload;
  std::string controls;
  std::string reason;
};

outcome run(std::string_view input, std::size_t split, const ws::frame_rules& rules) {
  ws::frame_decoder d(rules);
  outcome o;
  for (std::string_view part : {input.substr(0, split), input.substr(split)}) {
    std::string buf(part);
    const auto step = d.decode(buf.data(), buf.size());
    if (step.payload > buf.size()) __builtin_trap();
    o.payload.append(buf.data(), step.payload);
    if (!step.reason.empty()) {
      o.reason = step.reason;
      break;
    }
  }
  for (const auto& c : d.controls()) o.controls += std::to_string(static_cast<int>(c.op)) + ":" + c.payload + ";";
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (bool masked : {true, false}) {
    const ws::frame_rules rules{masked, 4096};
    const auto h = ws::parse_frame_header(input, rules);
    if (h.consumed > size) __builtin_trap();
    if (h.invalid() && h.reason.empty()) __builtin_trap();
    if (h.complete()) {
      char out[ws::max_header_bytes];
      const std::size_t n = ws::encode_frame_header(out, h.value.op, h.value.fin, h.value.length,
                                                    h.value.masked ? &h.value.mask : nullptr);
      if (n != h.consumed || std::string_view(out, n) != input.substr(0, n)) __builtin_trap();
    }
    const outcome whole = run(input, size, rules);
    const outcome split = run(input, size / 2, rules);
    // A violation may be found at a different byte, but never a different one or a different stream.
    if (whole.reason != split.reason) __builtin_trap();
    if (whole.reason.empty() && (whole.payload != split.payload || whole.controls != split.controls)) __builtin_trap();
  }
  return 0;
}
