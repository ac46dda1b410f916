#pragma once
// The relay side of the sing-mux bridge's fuzz targets (fuzz_yamux_frame, fuzz_h2mux): the Mux.Cool
// frames the bridge wrote for the relay must parse whole, and the relay answers each New with data
// and ends every other sub. Returns the answer, to feed back through bridge::down.
#include <string>
#include <string_view>

#include "core/wire/mux_frame.hpp"

namespace vlessbench::fuzz {

inline std::string answer_relay_frames(std::string_view relay) {
  std::string back;
  while (!relay.empty()) {
    const auto f = mux::parse_mux_frame(relay);
    if (!f.complete()) __builtin_trap();
    relay.remove_prefix(f.consumed);
    mux::frame k;
    k.id = f.value.id;
    if (f.value.st == mux::status::new_sub) {
      k.st = mux::status::keep;
      k.option = mux::option_data;
      k.data = "answer";
    } else {
      k.st = mux::status::end;
    }
    mux::encode_mux_frame(back, k);
  }
  return back;
}

}  // namespace vlessbench::fuzz
