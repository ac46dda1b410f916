// libFuzzer target for the smux frame parser (core/wire/smux_frame.hpp), then the input as a sing-mux smux
// session through the sing-mux framing (server/sing_mux_framing.hpp), with a stand-in engine taking its events.
// Invariants: consumed never exceeds the input; an invalid result has a reason; a complete frame re-encodes to
// its bytes; every proper prefix is need_more; the framing's events are well formed (an open names a
// destination, data and ends come for live subs only), and it never has more live streams than its limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/smux_frame.hpp"
#include "server/sing_mux_framing.hpp"
#include "sub_engine_stand_in.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = smux::parse_frame(input);
  if (r.consumed > size || (r.invalid() && r.reason.empty())) __builtin_trap();
  if (r.complete()) {
    std::string again;
    if (r.value.c == smux::cmd::upd)
      smux::encode_upd(again, r.value.sid, r.value.consumed, r.value.window);
    else
      smux::encode_frame(again, r.value.version, r.value.c, r.value.sid, r.value.data);
    if (again != input.substr(0, r.consumed)) __builtin_trap();
    for (std::size_t n = r.consumed; n-- > 0;)
      if (!smux::parse_frame(input.substr(0, n)).need_more()) __builtin_trap();
  }
  sing_mux::framing b(3);
  fuzz::sub_engine_stand_in engine;
  sing_mux::sub_events events;
  std::string client;
  std::string in("\x00\x00", 2);
  in.append(input);
  for (std::size_t at = 0; at < in.size(); at += 7) {
    if (!b.up(std::string_view(in).substr(at, 7), events, client).empty()) break;
    if (b.live() > 3) __builtin_trap();
    engine.take(b, events, client);
  }
  return 0;
}
