#pragma once
// The engine's side of the sing-mux framing's fuzz targets (fuzz_smux_frame, fuzz_yamux_frame, fuzz_h2mux):
// takes the events the framing (server/sing_mux_framing.hpp) yields, traps on one that is not well formed (an
// open without a destination or for an id the engine has, data or an end for an id it does not have), answers
// each open with data, closes every sub the client ends, and applies every credit.
#include <cstdint>
#include <set>
#include <string>

#include "server/sing_mux_framing.hpp"

namespace vlessbench::fuzz {

class sub_engine_stand_in {
 public:
  void take(sing_mux::framing& f, sing_mux::sub_events& events, std::string& to_client) {
    using kind = sing_mux::sub_event::kind_t;
    for (auto& e : events) {
      switch (e.kind) {
        case kind::open:
          if (!e.dest || live_.contains(e.id)) __builtin_trap();
          live_.insert(e.id);
          f.send(e.id, "answer", nullptr, to_client);
          break;
        case kind::data:
          if (!live_.contains(e.id)) __builtin_trap();
          break;
        case kind::end:
          if (!live_.contains(e.id)) __builtin_trap();
          live_.erase(e.id);
          f.closed(e.id, false, to_client);
          break;
        case kind::credit: f.consumed(e.stream, e.bytes, to_client); break;
      }
    }
    events.clear();
  }
  std::size_t live() const { return live_.size(); }

 private:
  std::set<std::uint16_t> live_;
};

}  // namespace vlessbench::fuzz
