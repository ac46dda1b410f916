#pragma once
// What the admin listener shows (docs/dashboard.md): counters, phase histograms
// and bounded rings of recent sessions, reloads and probe runs, fed by the same
// event structs the access log is written from (core/log/access_events.hpp), so the
// dashboard and the log cannot disagree. Sessions close on any worker thread
// ([limits] threads): one mutex guards everything, held only to copy.
//
// Memory is bounded: rings have fixed capacities, strings are capped, listener
// series are capped (listeners are config-bounded; a reload prunes those no
// longer configured), and reject reasons per listener are capped (the daemon's
// reasons are a fixed set of constants; more land in "other").
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/log/access_events.hpp"
#include "core/wire/route_header.hpp"

namespace vlessbench {

// Bucket upper bounds of the phase histograms, in milliseconds: fine around the
// 40 ms of a Nagle/delayed-ACK stall, coarse beyond.
inline constexpr std::array<double, 14> phase_buckets_ms = {0.5, 1, 2, 5, 10, 20, 30, 40, 50, 75, 100, 250, 1000, 5000};

// xhttp_post_gap: an XHTTP packet-up session's longest gap between uplink POSTs (its client's
// spacing), one value per session that had two POSTs or more.
enum class hub_phase { tls, vless_header, upstream_connect, xhttp_post_gap };
inline constexpr std::array<hub_phase, 4> hub_phases = {hub_phase::tls, hub_phase::vless_header,
                                                        hub_phase::upstream_connect, hub_phase::xhttp_post_gap};
std::string_view to_string(hub_phase p);  // "tls", "vless_header", "upstream_connect", "xhttp_post_gap"

struct phase_histogram {
  std::array<std::uint64_t, phase_buckets_ms.size()> buckets{};  // non-cumulative; +Inf = count
  std::uint64_t count = 0;
  double sum_ms = 0;
  void add(double ms);
};

struct listener_counters {
  std::uint64_t sessions = 0;  // admitted sessions, counted at close
  std::uint64_t stalls = 0;    // of them, stall suspected
  // xhttp: sessions on an HTTP/2 connection that carried earlier ones (reused), and header waits
  // over the stall threshold that were packet-up's POST spacing (not counted in stalls).
  std::uint64_t xhttp_reused = 0, spacing_waits = 0;
  std::uint64_t bytes_up = 0, bytes_down = 0;
  std::map<std::string, std::uint64_t, std::less<>> rejects;  // by reason
  std::array<phase_histogram, hub_phases.size()> phases{};
  // Targets: what they answered (HTTP/HTTPS requests, UDP echo datagrams, DNS queries, banner
  // connections), counted as each is logged, and of them those a VLESS session relayed; bytes
  // are counted in bytes_up (towards the target) and bytes_down.
  std::uint64_t answers = 0, answers_vless = 0;
  // The last reload that changed this listener's socket policy, and its stall count then, so the
  // page tells the stalls before it from those since (0 when no reload changed it).
  std::int64_t policy_changed_unix_ms = 0;
  std::uint64_t stalls_before_policy_change = 0;
};

// A [[udp_target]] echo's and a [[dns]] responder's UDP answers (docs/target.md "No amplifier"),
// for /metrics: the echo's datagrams by the answer they got and its bytes both ways; the DNS
// responder's UDP answers by what response rate limiting did with them.
struct udp_answer_counters {
  std::uint64_t echo_full = 0, echo_short = 0, echo_unanswered = 0;
  std::uint64_t echo_bytes_in = 0, echo_bytes_out = 0;
  std::uint64_t rrl_answered = 0, rrl_slipped = 0, rrl_dropped = 0;
};
// One closed VLESS session (vless.session), strings capped at hub_max_string
// bytes.
struct session_record {
  std::uint64_t id = 0;
  std::int64_t closed_unix_ms = 0;
  std::string listener, user, client, dest, transport, tls_version, alpn, sni, ja4, close_reason;
  std::string quickack;  // the listener's ACK policy at accept
  std::optional<double> tls_ms, header_ms,
      upstream_ms;  // hub_phases, absent when not reached
  bool stall = false;
  // xhttp (session_phases::xhttp), ms on the session's clock; absent when not reached or not XHTTP.
  std::optional<double> xhttp_get_ms, xhttp_first_post_ms, post_gap_median_ms, post_gap_max_ms;
  std::optional<std::uint64_t> post_gaps;  // packet-up only
  std::optional<bool> reused;
  bool post_spacing = false;  // its header wait was the POST spacing
  std::uint64_t bytes_up = 0, bytes_down = 0;
};

struct reload_record {
  std::int64_t unix_ms = 0;
  bool ok = false;
  std::uint64_t generation = 0;
  std::string error;
  std::optional<std::uint64_t> changes;
};

struct probe_record {
  std::int64_t unix_ms = 0;
  std::string listener, peer, user_agent, run, verdict, page_verdict;
  std::uint64_t new_count = 0, reuse_count = 0;
  std::size_t ok = 0, failed = 0, vless_samples = 0, direct_samples = 0, stall_samples = 0;
  std::optional<double> new_median_ms, reuse_median_ms;
};
probe_record make_probe_record(const probe_run_event& e);

// A listener as the running config has it, for the dashboard's table.
struct listener_view {
  std::string kind, name, listen, policy, upstream_policy, transport;
  std::string emulate;  // "delay 40 ms loss 1%"; empty: no path emulation
  std::uint32_t emulate_delay_ms = 0;
  double emulate_loss_pct = 0;
};

struct hub_snapshot {
  std::int64_t started_unix_ms = 0;
  std::uint64_t generation = 0;
  std::vector<listener_view> listeners;
  std::map<std::string, listener_counters, std::less<>> counters;  // by listener
  std::uint64_t reloads_ok = 0, reloads_failed = 0, probe_runs = 0;
  std::uint64_t open_sessions = 0, open_connections = 0;
  // Access-log lines dropped since start (gauges filled in by the daemon): reader too slow
  // (queue full), over [log] max_lines_per_second (rate) and over max_session_lines_per_second
  // (session_rate: authenticated VLESS sessions' own lines).
  std::uint64_t log_dropped_queue = 0, log_dropped_rate = 0, log_dropped_session_rate = 0;
  // Requests and connections the admin listener refused, and probe results refused, by reason
  // (a fixed vocabulary: docs/dashboard.md, docs/probe.md).
  std::map<std::string, std::uint64_t, std::less<>> admin_refused, probe_refused;
  std::map<std::string, udp_answer_counters, std::less<>> udp_answers;  // by listener
  // Datagrams the UDP echo and the DNS responder did not answer (core/runtime/udp_guard.hpp), by
  // listener, then reason.
  std::map<std::string, std::map<std::string, std::uint64_t, std::less<>>, std::less<>> udp_refused;
  std::vector<session_record> sessions;  // oldest first
  std::vector<reload_record> reloads;
  std::vector<probe_record> probes;
};

inline constexpr std::size_t hub_max_string = 256;
inline constexpr std::size_t hub_max_listeners = 256;
inline constexpr std::size_t hub_max_reasons = 64;  // per listener; beyond: "other"

class state_hub {
 public:
  static constexpr std::size_t session_ring = 200, reload_ring = 50, probe_ring = 50;

  void session_closed(const vless_session_event& e);
  void rejected(const vless_reject_event& e);
  // A target answered: count answers (datagrams of a UDP flow: its packets in), relayed or not.
  void target_answered(std::string_view listener, bool via_vless, std::uint64_t count, std::uint64_t bytes_up,
                       std::uint64_t bytes_down);
  void reloaded(const config_reload_event& e);
  void probe_run(probe_record r);
  // reason: one of a fixed set of names (past hub_max_reasons distinct ones: "other").
  void admin_refused(std::string_view reason);
  void probe_refused(std::string_view reason);
  // One datagram the echo took (bytes_in) and what it sent back (bytes_out, 0 when nothing).
  void udp_echo_counted(std::string_view listener, udp_echo_form form, std::uint64_t bytes_in, std::uint64_t bytes_out);
  // UDP queries the DNS responder's rate limit (target/dns_rrl.hpp) let through, slipped (answered
  // truncated) and dropped.
  void dns_rrl_counted(std::string_view listener, std::uint64_t answered, std::uint64_t slipped, std::uint64_t dropped);
  // n datagrams a UDP target did not answer. Listeners past hub_max_listeners are not counted;
  // kept across reloads (a UDP listener is not in set_listeners' list), as counters are.
  void udp_refused(std::string_view listener, std::string_view reason, std::uint64_t n = 1);
  // The running config's listeners and generation (at start and after each
  // reload that took); counters of listeners it no longer has are dropped, and a listener whose
  // policy or upstream policy changed has the time and its stalls so far noted.
  void set_listeners(std::uint64_t generation, std::vector<listener_view> listeners);
  // Gauges read from the daemon when a snapshot is taken are filled in by the
  // caller.
  hub_snapshot snapshot() const;

 private:
  listener_counters* counters_for(std::string_view listener);  // nullptr past hub_max_listeners

  mutable std::mutex mutex_;
  std::int64_t started_unix_ms_ = now_unix_ms();
  std::uint64_t generation_ = 0;
  std::vector<listener_view> listeners_;
  std::map<std::string, listener_counters, std::less<>> counters_;
  std::uint64_t reloads_ok_ = 0, reloads_failed_ = 0, probe_runs_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> admin_refused_, probe_refused_;
  std::map<std::string, udp_answer_counters, std::less<>> udp_answers_;
  udp_answer_counters* udp_answers_for(std::string_view listener);  // nullptr past hub_max_listeners
  std::map<std::string, std::map<std::string, std::uint64_t, std::less<>>, std::less<>> udp_refused_;
  std::deque<session_record> sessions_;
  std::deque<reload_record> reloads_;
  std::deque<probe_record> probes_;

 public:
  static std::int64_t now_unix_ms();
};

}  // namespace vlessbench
