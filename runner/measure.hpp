#pragma once
// The measurement loop: rounds of new-connection samples, then rounds of reused-connection
// samples, paths in a fresh random order every round, warm-ups unrecorded.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/path_spec.hpp"
#include "runner/sample.hpp"
#include "runner/stats.hpp"

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
  bool progress = false;  // progress bar on stderr (a terminal)
  // Not a terminal: one progress line on stderr every this many seconds; 0 = none.
  int progress_every_s = 0;
  // SIGINT and SIGTERM stop the run between samples (the sample in flight is cancelled and not
  // recorded); a second one exits at once with 128 + the signal.
  bool handle_signals = false;
  // Stop early when every sample of this many consecutive rounds (warm-ups included) failed: the
  // server or the proxy is gone, and the rest of the run would only add failures. 0 = never.
  int abort_after_failed_rounds = 5;
  // --bulk SIZE: paths are NAME/down and NAME/up (bulk_paths); each sample moves this many bytes.
  std::uint64_t bulk_bytes = 0;
};

// The GET every path sends; formatted before a sample's clock starts.
std::string format_get(const target_url& target, std::string_view run_id, std::uint64_t seq,
                       std::string_view path_name);

// A bulk upload's head: POST /sink with Content-Length bytes and the same labels as format_get.
std::string format_post_sink(const target_url& target, std::string_view run_id, std::uint64_t seq,
                             std::string_view path_name, std::uint64_t bytes);
// A banner:// reuse sample's line, echoed back by the target.
std::string format_echo_line(std::string_view run_id, std::uint64_t seq, std::string_view path_name);

// Fisher-Yates with the runner's PRNG: the same seed replays the same interleaving.
void shuffle_order(std::vector<std::size_t>& order, stats::prng& rng);

// How a run ended when it did not run to the end; both empty when it did.
struct measure_end {
  std::string aborted;      // every path failing round after round: why
  std::string interrupted;  // "SIGINT" or "SIGTERM"
  int signal = 0;           // its number
};

std::vector<sample> measure(const measure_options& opts, measure_end* end = nullptr);

}  // namespace vlessbench::runner
