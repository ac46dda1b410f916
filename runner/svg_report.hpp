#pragma once
// report.svg: the latency CDF of every path, new connections and reused ones side by side,
// hand-written SVG so it opens in any browser with nothing else installed.
#include <string>
#include <vector>

#include "runner/report.hpp"

namespace vlessbench::runner {

std::string render_svg(const run_metadata& meta, const std::vector<path_result>& results);

// Log-scale axis ticks (1-2-5 per decade) covering [lo, hi]; exposed for tests.
std::vector<double> log_ticks(double lo, double hi);

}  // namespace vlessbench::runner
