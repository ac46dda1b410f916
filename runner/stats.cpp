#include "runner/stats.hpp"

#include <algorithm>
#include <cmath>

namespace vlessbench::stats {

namespace {

// Median of a scratch buffer that may be reordered; nth_element keeps the bootstrap O(n) per
// resample instead of a full sort.
double median_in_place(std::vector<double>& v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace

std::uint64_t prng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t prng::below(std::uint64_t bound) {
  // Reject the top partial bucket so every residue is equally likely.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t x;
  do {
    x = next();
  } while (x >= limit);
  return x % bound;
}

std::optional<double> median(std::span<const double> values) {
  if (values.empty()) return std::nullopt;
  std::vector<double> v(values.begin(), values.end());
  return median_in_place(v);
}

std::optional<interval> bootstrap_median_ci(std::span<const double> values, std::uint64_t seed, int resamples,
                                            double level) {
  if (values.empty() || resamples < 1 || !(level > 0 && level < 1)) return std::nullopt;
  prng rng(seed);
  std::vector<double> medians;
  medians.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> scratch(values.size());
  for (int i = 0; i < resamples; ++i) {
    for (auto& x : scratch) x = values[rng.below(values.size())];
    medians.push_back(median_in_place(scratch));
  }
  std::sort(medians.begin(), medians.end());
  const double tail = (1 - level) / 2;
  return interval{sorted_quantile(medians, tail), sorted_quantile(medians, 1 - tail)};
}

std::optional<summary> summarize(std::span<const double> values, std::uint64_t seed) {
  if (values.empty()) return std::nullopt;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  summary s;
  s.n = v.size();
  s.median = sorted_quantile(v, 0.5);
  s.p95 = sorted_quantile(v, 0.95);
  s.min = v.front();
  s.max = v.back();
  s.median_ci = bootstrap_median_ci(values, seed);
  return s;
}

std::vector<double> paired_differences(std::span<const std::optional<double>> a,
                                       std::span<const std::optional<double>> b) {
  std::vector<double> out;
  const std::size_t rounds = std::min(a.size(), b.size());
  out.reserve(rounds);
  for (std::size_t r = 0; r < rounds; ++r)
    if (a[r] && b[r]) out.push_back(*a[r] - *b[r]);
  return out;
}

}  // namespace vlessbench::stats
