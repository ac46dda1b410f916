#include <catch2/catch.hpp>

#include <vector>

#include "runner/stats.hpp"

using namespace vlessbench;

TEST_CASE("median of odd and even counts", "[stats]") {
  const std::vector<double> odd{3, 1, 2};
  const std::vector<double> even{4, 1, 3, 2};
  REQUIRE(stats::median(odd) == 2.0);
  REQUIRE(stats::median(even) == 2.5);  // (2 + 3) / 2
  REQUIRE(stats::median(std::vector<double>{7}) == 7.0);
  REQUIRE_FALSE(stats::median(std::vector<double>{}).has_value());
}

TEST_CASE("quantile interpolates between closest ranks (type 7)", "[stats]") {
  const std::vector<double> one_to_ten{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  // h = (10 - 1) * 0.95 = 8.55 -> 9 + 0.55 * (10 - 9)
  REQUIRE(*stats::quantile(one_to_ten, 0.95) == Approx(9.55));
  // h = 4 * 0.95 = 3.8 -> 40 + 0.8 * (50 - 40)
  REQUIRE(*stats::quantile(std::vector<double>{50, 10, 40, 20, 30}, 0.95) == Approx(48.0));
  REQUIRE(*stats::quantile(one_to_ten, 0.0) == 1.0);
  REQUIRE(*stats::quantile(one_to_ten, 1.0) == 10.0);
  REQUIRE(*stats::quantile(one_to_ten, 0.5) == Approx(5.5));
  REQUIRE_FALSE(stats::quantile(one_to_ten, 1.5).has_value());
  REQUIRE_FALSE(stats::quantile(std::vector<double>{}, 0.5).has_value());
}

TEST_CASE("summarize reports n, median, p95, min, max", "[stats]") {
  const std::vector<double> v{2, 8, 4, 6};
  const auto s = stats::summarize(v, 1);
  REQUIRE(s);
  REQUIRE(s->n == 4);
  REQUIRE(s->median == Approx(5.0));
  REQUIRE(s->p95 == Approx(7.7));  // h = 3 * 0.95 = 2.85 -> 6 + 0.85 * 2
  REQUIRE(s->min == 2.0);
  REQUIRE(s->max == 8.0);
  REQUIRE(s->median_ci);
  REQUIRE_FALSE(stats::summarize(std::vector<double>{}, 1).has_value());
}

TEST_CASE("paired differences skip rounds where either side failed", "[stats]") {
  const std::vector<std::optional<double>> a{5.0, std::nullopt, 7.0, 9.0, 1.0};
  const std::vector<std::optional<double>> b{1.0, 2.0, std::nullopt, 4.0};
  REQUIRE(stats::paired_differences(a, b) == std::vector<double>{4.0, 5.0});
}

TEST_CASE("median of paired differences is not the difference of medians", "[stats]") {
  const std::vector<std::optional<double>> a{1.0, 10.0, 3.0};
  const std::vector<std::optional<double>> b{0.0, 9.0, 5.0};
  const auto d = stats::paired_differences(a, b);  // {1, 1, -2}
  REQUIRE(*stats::median(d) == 1.0);
  REQUIRE(*stats::median(std::vector<double>{1, 10, 3}) - *stats::median(std::vector<double>{0, 9, 5}) == -2.0);
}

TEST_CASE("bootstrap CI is deterministic for a seed and contains the median", "[stats]") {
  std::vector<double> v;
  for (int i = 0; i < 101; ++i) v.push_back(1.0 + (i * 37 % 101) * 0.01);  // 1.00 .. 2.00 shuffled
  const auto a = stats::bootstrap_median_ci(v, 42);
  const auto b = stats::bootstrap_median_ci(v, 42);
  REQUIRE(a);
  REQUIRE(a->low == b->low);
  REQUIRE(a->high == b->high);
  const double m = *stats::median(v);
  REQUIRE(m == Approx(1.5));
  REQUIRE(a->low <= m);
  REQUIRE(a->high >= m);
  REQUIRE(a->low < a->high);
  // The median of 101 uniform-ish values has a standard error of roughly 0.05 here: a 95% interval
  // far wider than that would mean the resampling is broken.
  REQUIRE(a->high - a->low < 0.4);

  const std::vector<double> constant(20, 3.25);
  const auto c = stats::bootstrap_median_ci(constant, 7);
  REQUIRE(c->low == 3.25);
  REQUIRE(c->high == 3.25);
  REQUIRE_FALSE(stats::bootstrap_median_ci(std::vector<double>{}, 1).has_value());
}

TEST_CASE("prng is the reference splitmix64 and bounded draws stay in range", "[stats]") {
  // First output of splitmix64 seeded with 0 (reference value from the published algorithm).
  stats::prng r(0);
  REQUIRE(r.next() == 0xe220a8397b1dcdafULL);
  stats::prng r2(5);
  for (int i = 0; i < 1000; ++i) REQUIRE(r2.below(3) < 3);
  REQUIRE(r2.below(1) == 0);
}
