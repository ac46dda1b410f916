#pragma once
// The measurement loop: rounds of new-connection samples, then rounds of reused-connection
// samples, paths in a fresh random order every round, warm-ups unrecorded.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "path_spec.hpp"
#include "sample.hpp"
#include "stats.hpp"

namespace vlessbench::runner {

struct measure_options {
  target_url target;
  std::vector<path_spec> paths;
  std::size_t baseline = 0;
  int new_count = 300;
  int reuse_count = 500;
  int warmup = 20;
  std::chrono::milliseconds timeout{5000};
  std::chrono::milliseconds pause{2};
  vless_client_options vless_defaults;
  std::uint64_t seed = 0;
  std::string run_id;
  bool progress = false;  // progress bar on stderr
};

// The GET every path sends; formatted before a sample's clock starts.
std::string format_get(const target_url& target, std::string_view run_id, std::uint64_t seq,
                       std::string_view path_name);

// Fisher-Yates with the runner's PRNG: the same seed replays the same interleaving.
void shuffle_order(std::vector<std::size_t>& order, stats::prng& rng);

std::vector<sample> measure(const measure_options& opts);

}  // namespace vlessbench::runner
