#pragma once
// Statistics for latency samples: pure functions, hand-checked in tests/unit/runner/test_stats.cpp.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/wire/quantile.hpp"

namespace vlessbench::stats {

// Median: mean of the two middle values for even n. Empty input -> nullopt. The quantile
// (type 7) is core's: quantile.hpp.
std::optional<double> median(std::span<const double> values);

struct interval {
  double low = 0;
  double high = 0;
};
// Percentile bootstrap 95% CI of the median: `resamples` resamples with a fixed-seed PRNG so the
// same data and seed give the same interval.
std::optional<interval> bootstrap_median_ci(std::span<const double> values, std::uint64_t seed, int resamples = 2000,
                                            double level = 0.95);

struct summary {
  std::size_t n = 0;
  double median = 0, p95 = 0, min = 0, max = 0;
  std::optional<interval> median_ci;
};
std::optional<summary> summarize(std::span<const double> values, std::uint64_t seed);

// Per-round paired differences a[r] - b[r], for the rounds where both sides have a value (a failed
// sample is nullopt). The seed's "paired median" is the median of these, which cancels drift that
// affects both paths of one round; it is not the difference of the two medians.
std::vector<double> paired_differences(std::span<const std::optional<double>> a,
                                       std::span<const std::optional<double>> b);

// The PRNG behind the bootstrap and the runner's path shuffles: splitmix64, chosen because its
// output is fixed by its definition on every platform (std::uniform_int_distribution is not).
class prng {
 public:
  explicit prng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  std::uint64_t below(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

}  // namespace vlessbench::stats
