// libFuzzer target for the browser probe's posted results. Invariants checked: a refusal always
// says why; an accepted body consumed all of itself, holds no more samples than the cap, only the
// values the schema allows, and its summary counts every sample once.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/wire/probe_result.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto r = parse_probe_result(input);
  if (r.need_more()) __builtin_trap();  // a body is always complete
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (r.consumed != size || r.value.samples.size() > probe_max_samples) __builtin_trap();
  if (r.value.run.empty() || r.value.run.size() > 32) __builtin_trap();
  for (const auto& s : r.value.samples) {
    if (s.route != "vless" && s.route != "direct" && s.route != "unknown") __builtin_trap();
    if (s.ok && !s.ms) __builtin_trap();
  }
  const auto sum = summarize_probe(r.value);
  if (sum.ok + sum.failed != r.value.samples.size() || sum.stall_samples > sum.vless_samples) __builtin_trap();
  return 0;
}
