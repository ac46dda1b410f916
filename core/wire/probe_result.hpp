#pragma once
// The browser probe's posted results (POST /probe/result, docs/probe.md): a small, strict, bounded
// JSON reader for exactly this document, and the summary the daemon logs as probe.run. The daemon
// has no JSON library, and a body posted from any browser is hostile input: the size, nesting
// depth, sample count and string lengths are capped, unknown keys and wrong types are refused with
// a reason.
//
//   {"v":1,"run":"k3x9","new":5,"reuse":5,"verdict":"no_stall",
//    "samples":[{"seq":1,"path":"target","mode":"new","ok":true,"ms":1.234,"route":"vless",
//                "session":17,"tls":1.2,"vless":0.05,"upstream":0.1}, ...]}
//
// Pure: the whole body in (Content-Length framing delivers it complete, so a cut body is invalid,
// never need_more), a probe_result or a reason out.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench {

inline constexpr std::size_t probe_max_body = 256 * 1024;
inline constexpr std::size_t probe_max_samples = 1000;
inline constexpr std::size_t probe_max_depth = 4;  // document -> samples -> sample (3 used)
inline constexpr std::size_t probe_max_string = 64;
inline constexpr std::uint64_t probe_max_count = 1000;  // "new" / "reuse"

struct probe_sample {
  std::uint64_t seq = 0;
  std::string path;  // "target" (the page's origin) or "control" (the direct control origin)
  std::string mode;  // "new" or "reuse"
  bool ok = false;
  std::optional<double> ms;  // absent for a failed sample
  std::string route;         // "vless", "direct" or "unknown" (from X-Vlessbench-Route)
  std::optional<std::uint64_t> session;
  std::optional<double> tls, vless,
      upstream;  // server phases (ms) from Server-Timing
  // Not in the document: set by the daemon when the sample names the route and session it served
  // that request on (target/probe_runs.hpp). Only verified samples count as proof.
  bool verified = false;
};

struct probe_result {
  std::string run;
  std::uint64_t new_count = 0, reuse_count = 0;
  std::string verdict;  // the page's own verdict
  std::vector<probe_sample> samples;
};

parse_result<probe_result> parse_probe_result(std::string_view body);

// What the daemon concludes from a probe's samples: its own medians and verdict, never the page's
// figures taken on trust.
struct probe_summary {
  std::size_t ok = 0, failed = 0;
  std::size_t vless_samples = 0, direct_samples = 0;
  std::size_t verified = 0;  // samples the daemon saw as the page says (probe_sample::verified)
  // VLESS and stall counts and the verdict take verified samples only.
  std::size_t stall_samples = 0;  // VLESS phase (TLS done -> header) >= stall_threshold_ms
  std::optional<double> new_median_ms, new_p95_ms, reuse_median_ms,
      reuse_p95_ms;          // path "target"
  std::string_view verdict;  // "stall", "no_stall" (VLESS samples, none stalled), "no_vless"
};
probe_summary summarize_probe(const probe_result& r);
bool probe_sample_stalled(const probe_sample& s);

}  // namespace vlessbench
