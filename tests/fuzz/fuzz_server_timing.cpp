// libFuzzer target for the Server-Timing header the runner reads (core/wire/route_header.hpp).
// Invariants: every phase read is a finite duration >= 0; a refusal names its metric and stays
// short (it goes to samples.csv and a terminal).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/route_header.hpp"
#include "core/wire/server_timing.hpp"

using namespace vlessbench;

namespace {

bool sound(const std::optional<double>& ms) { return !ms || (std::isfinite(*ms) && *ms >= 0); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto t = parse_server_timing(input);
  if (!sound(t.tls) || !sound(t.upgrade) || !sound(t.vless) || !sound(t.resolve) || !sound(t.upstream))
    __builtin_trap();
  const auto refused = refused_server_timing(input);
  if (refused && (refused->find(";dur=") == std::string::npos || refused->size() > 80)) __builtin_trap();
  return 0;
}
