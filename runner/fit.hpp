#pragma once
// Round trips per new request: a path's new-connection time fitted as fixed + k x RTT over paths
// that differ only in their round-trip time (listeners with different emulated delays). k is the
// round trips a client spends on a new request (TCP, TLS, its transport's upgrade, its first
// write); fixed is what does not scale with distance (a Nagle stall, a server's work). Pure
// functions, checked by tests/unit/runner/test_fit.cpp.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runner/stats.hpp"

namespace vlessbench::stats {

// Two-sided 95% quantile of Student's t with df degrees of freedom (df >= 1).
double t_quantile_975(std::size_t df);

struct line_fit {
  std::size_t n = 0;
  double slope = 0, intercept = 0;
  interval slope_ci, intercept_ci;  // 95%, from the residuals' standard error
  double r2 = 0;
};
// Ordinary least squares of y on x; nullopt below 3 points or when every x is the same (no
// spread to fit a slope on).
std::optional<line_fit> fit_line(std::span<const double> x, std::span<const double> y);

}  // namespace vlessbench::stats

namespace vlessbench::runner {

// One point of a family's fit: a new-connection sample's time and the path RTT it met, in ms.
struct rtt_point {
  double rtt_ms = 0;
  double ms = 0;
};

// Paths whose RTTs differ by less than this measure one distance: no slope to fit on.
inline constexpr double min_rtt_spread_ms = 1.0;

struct round_trip_fit {
  std::string family;                  // what the fitted paths share (client, transport, ACK policy)
  std::vector<std::string> paths;      // the family's paths, in run order
  std::optional<stats::line_fit> fit;  // k = slope (round trips), fixed = intercept (ms)
  std::string text;                    // one line for the table: the fit, or why there is none
};
// rtt_ms: the family's path RTTs (median of each path), for the "why not" text.
round_trip_fit fit_round_trips(std::string family, std::vector<std::string> paths, std::span<const rtt_point> points,
                               std::span<const double> path_rtts_ms);

}  // namespace vlessbench::runner
