#include "core/net/path_emulation.hpp"

#include <cstdio>

namespace vlessbench {

std::string describe(const path_emulation& e) {
  if (!e.active()) return "off";
  std::string out;
  const auto add = [&](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  if (e.delay_ms > 0) add("delay " + std::to_string(e.delay_ms) + " ms");
  if (e.jitter_ms > 0) add("jitter " + std::to_string(e.jitter_ms) + " ms");
  if (e.loss_pct > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "loss %g%%", e.loss_pct);
    add(buf);
  }
  return out;
}

}  // namespace vlessbench
