#pragma once
// Statistics for latency samples: pure functions, hand-checked in tests/unit/test_stats.cpp.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace vlessbench::stats {

// Median: mean of the two middle values for even n. Quantile: linear interpolation between
// closest ranks (type 7, as numpy's default), q in [0,1]. Empty input -> nullopt.
std::optional<double> median(std::span<const double> values);
std::optional<double> quantile(std::span<const double> values, double q);

struct interval {
  double low = 0;
  double high = 0;
};
// Percentile bootstrap 95% CI of the median: `resamples` resamples with a fixed-seed PRNG so the
// same data and seed give the same interval.
std::optional<interval> bootstrap_median_ci(std::span<const double> values, std::uint64_t seed,
                                            int resamples = 2000, double level = 0.95);

struct summary {
  std::size_t n = 0;
  double median = 0, p95 = 0, min = 0, max = 0;
  std::optional<interval> median_ci;
};
std::optional<summary> summarize(std::span<const double> values, std::uint64_t seed);

}  // namespace vlessbench::stats
