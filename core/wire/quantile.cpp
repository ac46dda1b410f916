#include "core/wire/quantile.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace vlessbench::stats {

double sorted_quantile(std::span<const double> sorted, double q) {
  const double h = (static_cast<double>(sorted.size()) - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

std::optional<double> quantile(std::span<const double> values, double q) {
  if (values.empty() || !(q >= 0 && q <= 1)) return std::nullopt;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  return sorted_quantile(v, q);
}

}  // namespace vlessbench::stats
