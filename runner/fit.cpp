#include "runner/fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "runner/number_format.hpp"

namespace vlessbench::stats {

double t_quantile_975(std::size_t df) {
  static constexpr std::array<double, 30> table{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                                2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                                2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df == 0) return std::nan("");
  if (df <= table.size()) return table[df - 1];
  // Cornish-Fisher expansion around the normal quantile: within 0.001 of the exact value past 30.
  const double z = 1.959963984540054, v = static_cast<double>(df);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

std::optional<line_fit> fit_line(std::span<const double> x, std::span<const double> y) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 3) return std::nullopt;
  const auto dn = static_cast<double>(n);
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= dn;
  my /= dn;
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (!(sxx > 1e-12 * std::max(1.0, mx * mx) * dn)) return std::nullopt;
  line_fit f;
  f.n = n;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double ssr = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = y[i] - (f.intercept + f.slope * x[i]);
    ssr += r * r;
  }
  f.r2 = syy > 0 ? 1 - ssr / syy : 1;
  const double s2 = ssr / (dn - 2);
  const double t = t_quantile_975(n - 2);
  const double se_slope = std::sqrt(s2 / sxx);
  const double se_intercept = std::sqrt(s2 * (1 / dn + mx * mx / sxx));
  f.slope_ci = {f.slope - t * se_slope, f.slope + t * se_slope};
  f.intercept_ci = {f.intercept - t * se_intercept, f.intercept + t * se_intercept};
  return f;
}

}  // namespace vlessbench::stats

namespace vlessbench::runner {

namespace {

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

round_trip_fit fit_round_trips(std::string family, std::vector<std::string> paths, std::span<const rtt_point> points,
                               std::span<const double> path_rtts_ms) {
  round_trip_fit r;
  r.family = std::move(family);
  r.paths = std::move(paths);
  const auto [lo, hi] = std::minmax_element(path_rtts_ms.begin(), path_rtts_ms.end());
  const double spread = path_rtts_ms.empty() ? 0 : *hi - *lo;
  if (r.paths.size() < 2 || spread < min_rtt_spread_ms) {
    r.text = "no fit: needs paths of this client and transport at two or more round-trip times (RTT spread " +
             fixed2(spread) + " ms < " + fixed2(min_rtt_spread_ms) + " ms; listeners with emulate.delay_ms)";
    return r;
  }
  std::vector<double> x, y;
  x.reserve(points.size());
  y.reserve(points.size());
  for (const auto& p : points) {
    x.push_back(p.rtt_ms);
    y.push_back(p.ms);
  }
  r.fit = stats::fit_line(x, y);
  if (!r.fit) {
    r.text = "no fit: " + std::to_string(points.size()) + " samples with a measured RTT";
    return r;
  }
  const auto& f = *r.fit;
  r.text = "k " + fixed2(f.slope) + " round trips [" + fixed2(f.slope_ci.low) + ", " + fixed2(f.slope_ci.high) +
           "], fixed " + fmt_ms(f.intercept) + " ms [" + fmt_ms(f.intercept_ci.low) + ", " +
           fmt_ms(f.intercept_ci.high) + "] (95% CI; " + std::to_string(f.n) + " samples, RTT " + fmt_ms(*lo) + "-" +
           fmt_ms(*hi) + " ms)";
  return r;
}

}  // namespace vlessbench::runner
