#pragma once
// The one quantile of the project: the runner's statistics and the load generator's latency
// figures both use it, so a "p95" means the same thing in every report.
#include <optional>
#include <span>

namespace vlessbench::stats {

// Linear interpolation between closest ranks (type 7, as numpy's default), q in [0,1], of values
// already sorted ascending and not empty.
double sorted_quantile(std::span<const double> sorted, double q);
// The same of unsorted values (copied and sorted). Empty input or q outside [0,1] -> nullopt.
std::optional<double> quantile(std::span<const double> values, double q);

}  // namespace vlessbench::stats
