// libFuzzer target for the gun framing (core/wire/gun_codec.hpp). Invariants:
// consumed never exceeds the input; the whole-message parser and the streaming
// decoder agree on every message (the same data, the same reason); streaming
// the input whole or split at any point gives the same data and verdict; and a
// round trip: the data chunks parse_message found, encoded again (as a Tun
// message each, and as one TunMulti message), decode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/gun_codec.hpp"

using namespace vlessbench;

namespace {

struct outcome {
  std::string data;
  std::string reason;
};

outcome stream(std::string_view input, std::size_t split, gun::message_kind kind) {
  gun::stream_decoder d(kind, 4096);
  outcome o;
  for (std::string_view part : {input.substr(0, split), input.substr(split)}) {
    const auto step = d.decode(part, o.data);
    if (step.consumed > part.size()) __builtin_trap();
    if (!step.reason.empty()) {
      o.reason = step.reason;
      break;
    }
    if (step.consumed != part.size()) __builtin_trap();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (auto kind : {gun::message_kind::hunk, gun::message_kind::multi_hunk}) {
    // Message by message with the whole-message parser.
    outcome parsed;
    std::vector<std::string_view> chunks;
    bool tail = false;  // an incomplete message at the end
    for (std::string_view rest = input;;) {
      const auto r = gun::parse_message(rest, kind, 4096);
      if (r.consumed > rest.size()) __builtin_trap();
      if (r.invalid()) {
        if (r.reason.empty()) __builtin_trap();
        parsed.reason = r.reason;
        break;
      }
      if (!r.complete()) {
        tail = !rest.empty();
        break;
      }
      for (auto c : r.value.chunks) {
        parsed.data.append(c);
        chunks.push_back(c);
      }
      rest.remove_prefix(r.consumed);
    }
    const outcome whole = stream(input, size, kind);
    const outcome split = stream(input, size / 2, kind);
    if (whole.reason != split.reason || whole.data != split.data) __builtin_trap();
    // The streaming decoder hands data on before a message is complete, and may
    // find a violation in an incomplete one; the parser does neither.
    if (whole.reason != parsed.reason && !(parsed.reason.empty() && tail)) __builtin_trap();
    if (whole.data.compare(0, parsed.data.size(), parsed.data) != 0) __builtin_trap();
    if (parsed.reason.empty() && whole.data.size() < parsed.data.size()) __builtin_trap();
    // Round trip.
    std::string again;
    for (auto c : chunks) again += gun::encode_hunk(c);
    again += gun::encode_multi_hunk(chunks);
    std::string decoded;
    gun::stream_decoder d(gun::message_kind::multi_hunk, 1u << 20);
    if (!d.decode(again, decoded).reason.empty() || !d.at_boundary()) __builtin_trap();
    if (decoded != parsed.data + parsed.data) __builtin_trap();
  }
  return 0;
}
