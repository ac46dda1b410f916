#pragma once
// Refusals in the human log at info (core/log/refusal_tally.hpp): at most one line per reason per
// second, with a count and the last one as a sample; the access log keeps a vless.reject line each.
#include <string_view>

#include "core/log/logging.hpp"
#include "server/runtime.hpp"

namespace vlessbench {

inline void log_refusals(const refusal_tally::report& r) {
  spdlog::info("vless: {} connection(s) refused: {} (last: {}; each has a vless.reject line in the access log)",
               r.count, r.reason, r.sample);
}

inline void note_refusal(runtime& rt, std::string_view reason, std::string_view sample) {
  if (auto r = rt.refusals.note(reason, sample, refusal_tally::clock::now())) log_refusals(*r);
}

}  // namespace vlessbench
