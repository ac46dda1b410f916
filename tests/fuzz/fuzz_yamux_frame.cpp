// libFuzzer target for the yamux frame parser (core/wire/yamux_frame.hpp), then the input as a sing-mux yamux
// session through the sing-mux framing (server/sing_mux_framing.hpp), with a stand-in engine answering every
// stream it opened. Invariants: consumed never exceeds the input; an invalid result has a reason; a complete
// frame re-encodes to its bytes; every proper prefix is need_more; the framing's events are well formed;
// what it writes to the client always parses as yamux frames; live streams stay within the limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/yamux_frame.hpp"
#include "server/sing_mux_framing.hpp"
#include "sub_engine_stand_in.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = yamux::parse_frame(input);
  if (r.consumed > size || (r.invalid() && r.reason.empty())) __builtin_trap();
  if (r.complete()) {
    std::string again;
    yamux::encode_frame(again, r.value.t, r.value.flags, r.value.stream, r.value.length, r.value.data);
    if (again != input.substr(0, r.consumed)) __builtin_trap();
    for (std::size_t n = r.consumed; n-- > 0;)
      if (!yamux::parse_frame(input.substr(0, n)).need_more()) __builtin_trap();
  }
  sing_mux::framing b(3);
  fuzz::sub_engine_stand_in engine;
  sing_mux::sub_events events;
  std::string client;
  std::string in("\x00\x01", 2);
  in.append(input);
  for (std::size_t at = 0; at < in.size(); at += 11) {
    if (!b.up(std::string_view(in).substr(at, 11), events, client).empty()) break;
    if (b.live() > 3) __builtin_trap();
    engine.take(b, events, client);
  }
  for (std::string_view v(client); !v.empty();) {
    const auto f = yamux::parse_frame(v, 1u << 30);
    if (!f.complete()) __builtin_trap();
    v.remove_prefix(f.consumed);
  }
  return 0;
}
