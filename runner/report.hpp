#pragma once
// From samples to numbers and files: pure functions (strings in, strings out) so every figure in
// the table, summary.json and report.svg can be checked by a unit test.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runner/fit.hpp"
#include "runner/path_spec.hpp"
#include "runner/sample.hpp"
#include "runner/stats.hpp"

namespace vlessbench::runner {

struct stall_verdict {
  // not_applicable: udp:// and dns:// targets (no TLS-done -> VLESS-header phase is timed per
  // datagram, and a flow's first datagram carries the header with it).
  enum class kind { no_data, none, intermittent, stall, not_applicable };
  kind verdict = kind::no_data;
  std::size_t with_timing = 0;  // ok new-connection samples carrying a vless phase
  std::size_t stalled = 0;      // of those, vless phase >= threshold
  // A STALL although the listener had QUICKACK on (Server-Timing ack): TCP is terminated between.
  bool terminated_in_between = false;
  double share = 0;
  // Median phases: of the stalled samples for stall and intermittent (the evidence), of all
  // samples with timing otherwise. A phase longer than its own sample is never counted or quoted.
  bool phases_of_stalled = false;
  std::optional<double> tls_ms, vless_ms, upstream_ms;
  std::size_t foreign_phases = 0;          // phases left out: longer than their whole sample
  std::size_t shared_session_samples = 0;  // left out: one session answered several (mux subs)
  std::vector<double> vless_sorted_ms;     // the counted VLESS header waits, sorted (the stall plot)
  std::optional<double> max_vless_ms;
  // The waits judged are the server's less this many RTTs of the path (header_wait).
  int rtts_subtracted = 0;
  std::optional<double> rtt_subtracted_ms;  // median of the RTTs subtracted
  // XHTTP packet-up (Server-Timing xgap, xgapmax): samples whose session had uplink POSTs at least
  // the threshold apart (the client's spacing, Xray's scMinPostsIntervalMs), the median of their
  // sessions' median gaps and the longest gap; of them, header waits >= the threshold that were
  // that spacing (wait_is_post_spacing), which are not counted as stalled.
  std::size_t spaced = 0;
  std::size_t spacing_waits = 0;
  std::optional<double> post_gap_ms, post_gap_max_ms;
  std::string text;  // one line for the table
};
std::string_view to_string(stall_verdict::kind k);
// Round trips the transport spends inside the server's VLESS-header wait (from TLS done, or from
// the 101 on an upgrade, to the header complete): ws and httpupgrade without early data send the
// header only once the 101 arrived, one round trip after the server sent it. The verdict
// subtracts that many measured RTTs (the sample's own, else rtt_ms) and says so.
struct header_wait {
  int round_trips = 0;
  std::string why;               // "ws without early data"
  std::optional<double> rtt_ms;  // the path's median RTT, for samples without their own
};
// fresh: the path's new-connection samples, whose median RTT is the fallback rtt_ms; client: how
// the built-in client writes on that path (a Nagle-prone one waits for an ACK).
header_wait header_wait_of(const path_spec& path, std::span<const sample> fresh = {},
                           const vless_client_options& client = {});
stall_verdict judge_stall(std::span<const sample> new_connection_samples, const header_wait& wait = {});
// What udp:// and dns:// runs say instead of a verdict.
stall_verdict stall_not_applicable();

struct mode_result {
  std::size_t attempted = 0;
  std::size_t failed = 0;
  std::optional<stats::summary> latency;  // ms, ok samples only
  std::vector<double> paired_deltas;      // ms, per round vs the baseline
  std::optional<double> paired_delta_median;
  std::optional<stats::interval> paired_delta_ci;
  std::map<std::string, std::size_t> errors;  // reason -> count
  std::vector<double> sorted_ms;              // for the CDF
  // https:// targets (new connections): the inner TLS handshake phase of the ok samples, ms.
  std::vector<double> inner_tls_ms;  // sorted
  std::optional<double> inner_tls_median, inner_tls_p95;
  // Bulk paths: throughput of the ok samples, MB/s (10^6 bytes/s).
  struct throughput {
    std::size_t n = 0;
    double median = 0, p5 = 0, p95 = 0;
  };
  std::vector<double> sorted_mbps;
  std::optional<throughput> mbps;
};

struct path_result {
  std::string name;
  path_kind kind = path_kind::direct;
  std::string spec;
  bool baseline = false;
  vless_client_options client;  // meaningful for vless paths
  mode_result fresh;            // new connections
  mode_result reuse;
  std::size_t route_mismatches = 0;
  std::map<std::string, std::size_t> routes;  // "direct"/"vless"/"unknown" -> count
  // xhttp over h2: samples (per mode, ok or not) whose XHTTP session rode an HTTP/2 connection that
  // carried sessions before (Xray's XMUX): a new VLESS connection without a handshake.
  std::size_t shared_h2_fresh = 0, shared_h2_reuse = 0;
  stall_verdict stall;
  // The path's RTT (median over its new-connection samples that measured one, ms) and the fit of
  // its family (the paths that differ from it only in RTT): fixed + k x RTT (runner/fit.hpp).
  std::optional<double> rtt_ms;
  std::optional<round_trip_fit> round_trips;
  std::string last_error;  // of the path's last failed sample, in the order they were taken
  // What the daemon said it was running for this path's answers (Server-Timing ack and gen):
  // samples per listener ACK policy and per config generation, so runs across a reload compare.
  std::map<std::string, std::size_t> server_acks;
  std::map<std::uint64_t, std::size_t> server_generations;
};
// "ack kernel, generation 1" (several: "ack kernel 40 + on 60"); empty when the daemon said nothing.
std::string format_server_seen(const std::map<std::string, std::size_t>& acks,
                               const std::map<std::uint64_t, std::size_t>& generations);

struct run_metadata {
  std::string run_id;
  std::uint64_t seed = 0;
  std::string version;
  std::string tls_library;
  std::string asio_version;
  std::string host;
  std::string time_utc;
  std::string command_line;
  std::string target;
  std::uint64_t bulk_bytes = 0;  // --bulk SIZE; 0: not a bulk run
  int new_count = 0, reuse_count = 0, warmup = 0;
  int timeout_ms = 0, pause_ms = 0;
  vless_client_options vless_defaults;
  double duration_s = 0;
  std::string aborted;      // why the run stopped early; empty when it ran to the end
  std::string interrupted;  // "SIGINT"/"SIGTERM" when a signal stopped it; empty otherwise
};

// "1 path", "3 paths".
std::string plural(std::size_t n, std::string_view one, std::string_view many);

// A path the run cannot vouch for: no successful sample, or more than the stated share failed.
struct failing_path {
  std::string name;
  std::size_t attempted = 0, failed = 0;
  std::string last_error;
  std::string hint;  // what the error usually means and what to check; may be empty
};
std::vector<failing_path> failing_paths(const std::vector<path_result>& results, double max_failed_share);
// What an error seen on a path of this kind usually means: a wrong UUID, an untrusted
// certificate, a proxy entry that is not running, ...
// direct_error: the direct path's last error when every one of its samples failed, else empty.
std::string failure_hint(path_kind kind, std::string_view error, std::string_view direct_error = {});
// An error that says the server closed the connection (after the VLESS header, for a vless path).
bool closed_after_header(std::string_view error);
std::string format_failing_paths(const std::vector<failing_path>& failing, double max_failed_share);

// Share links with their UUID replaced by "REDACTED" (host, port, parameters and name stay, so
// the path is still recognisable); any other text unchanged.
std::string redact_links(std::string_view text);

// --export-markdown: the table as GitHub Markdown, for posting a result.
std::string format_markdown(const run_metadata& meta, const std::vector<path_result>& results);

std::vector<path_result> analyze(const std::vector<path_spec>& paths, std::size_t baseline,
                                 const std::vector<sample>& samples, const vless_client_options& defaults,
                                 std::uint64_t seed);

std::string format_table(const std::vector<path_result>& results);

// Round trips per new request (runner/round_trips.cpp): each path's rtt_ms and its family's fit
// (round_trips) from the new-connection samples, per path in paths' order.
void fit_round_trip_families(const std::vector<path_spec>& paths, std::vector<path_result>& results,
                             const std::vector<std::vector<sample>>& fresh);
// The table's "round trips per new request" section; empty when no path measured an RTT.
std::string format_round_trips(const std::vector<path_result>& results, std::size_t name_width);
// ns is the time to completion, or to the failure for ok = 0 (e.g. how long a timeout took).
std::string samples_csv(const std::vector<sample>& samples);
std::string summary_json(const run_metadata& meta, const std::vector<path_result>& results);

// RFC 4180 quoting when needed; parse_csv_line is its inverse (for `verify`).
std::string csv_field(std::string_view s);
std::vector<std::string> parse_csv_line(std::string_view line);

}  // namespace vlessbench::runner
