#pragma once
// A listener's emulated path (`emulate = { delay_ms, jitter_ms, loss_pct }`): what the kernel's
// netem queueing discipline adds to what the daemon's host sends on that listener's connections
// (server/netem.hpp installs it). A plain value the config reads.
#include <cstdint>
#include <string>

namespace vlessbench {

struct path_emulation {
  std::uint32_t delay_ms = 0;
  std::uint32_t jitter_ms = 0;
  double loss_pct = 0;
  bool active() const { return delay_ms > 0 || jitter_ms > 0 || loss_pct > 0; }
  bool operator==(const path_emulation&) const = default;
};

// "delay 40 ms jitter 2 ms loss 1%" (only what is set); "off" when nothing is.
std::string describe(const path_emulation& e);

inline constexpr std::uint32_t max_emulated_delay_ms = 10000;

}  // namespace vlessbench
