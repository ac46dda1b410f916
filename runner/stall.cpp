// The stall verdict: did new connections wait for the server's ACK before sending the VLESS
// header (Nagle meeting delayed ACK), judged from the daemon's own phases of each sample.
#include <algorithm>
#include <cmath>
#include <map>

#include "runner/number_format.hpp"
#include "runner/report.hpp"

namespace vlessbench::runner {

namespace {

std::optional<double> median_of(std::vector<double> v) { return stats::median(v); }

}  // namespace

std::string_view to_string(stall_verdict::kind k) {
  switch (k) {
    case stall_verdict::kind::no_data: return "no-data";
    case stall_verdict::kind::none: return "none";
    case stall_verdict::kind::intermittent: return "intermittent";
    case stall_verdict::kind::stall: return "stall";
    case stall_verdict::kind::not_applicable: return "n/a";
  }
  return "?";
}

stall_verdict stall_not_applicable() {
  stall_verdict v;
  v.verdict = stall_verdict::kind::not_applicable;
  v.text =
      "not applicable: a UDP flow's VLESS header goes with its first datagram, so the server "
      "times no TLS-done -> VLESS-header wait (see methodology.md, UDP and DNS)";
  return v;
}

namespace {

// A server phase longer than the whole sample did not happen inside it: the client's clock runs
// from before its connect to the last byte read, and every phase of a connection of its own lies
// within. A mux sub's phases, for one, are its shared session's, timed off the sub's clock.
std::optional<double> own_phase(const std::optional<double>& phase, const sample& s) {
  if (!phase || !std::isfinite(*phase) || *phase < 0 || *phase > s.ms()) return std::nullopt;
  return phase;
}

// "tls 1.051 ms, vless 43.514 ms, upstream 0.110 ms", naming only the phases the samples had (gRPC
// sessions time no tls phase of their own).
std::string phase_list(const stall_verdict& v) {
  std::string out;
  const auto add = [&](const char* name, const std::optional<double>& ms) {
    if (!ms) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + fmt_ms(ms) + " ms";
  };
  add("tls", v.tls_ms);
  add("vless", v.vless_ms);
  add("upstream", v.upstream_ms);
  return out;
}

// The new-connection samples' own server phases, all and stalled ones; v gets the counts.
struct stall_evidence {
  std::vector<double> tls_all, vless_all, up_all, tls_st, vless_st, up_st;
  std::size_t quickack_stalled = 0;     // stalled on a listener that re-arms QUICKACK
  std::size_t through_vless = 0;        // ok samples whose answer named a VLESS route
  std::size_t shared = 0;               // samples on a session that carried others too (mux subs)
  std::vector<double> gaps, gap_maxes;  // packet-up sessions with a POST gap >= the threshold
};

// packet-up's POST spacing in a sample's session: counted, and whether it was the header's wait.
bool post_spacing(const sample& s, double wait, stall_evidence& e, stall_verdict& v) {
  if (!s.timing.xgapmax || *s.timing.xgapmax < stall_threshold_ms) return false;
  ++v.spaced;
  if (s.timing.xgap) e.gaps.push_back(*s.timing.xgap);
  e.gap_maxes.push_back(*s.timing.xgapmax);
  const double from = s.timing.tls.value_or(0) + s.timing.upgrade.value_or(0);
  return wait_is_post_spacing(from, wait, s.timing.xpost, s.timing.xgapmax);
}

stall_evidence gather_phases(std::span<const sample> samples, const header_wait& hw, stall_verdict& v,
                             std::vector<double>& rtts) {
  stall_evidence e;
  // A session that answered several new-connection samples is a shared mux connection: its
  // phases were timed once, for the session, not for any of these samples.
  std::map<std::uint64_t, std::size_t> per_session;
  for (const auto& s : samples)
    if (s.ok && s.mode == sample_mode::new_connection && s.route.session) ++per_session[*s.route.session];
  for (const auto& s : samples) {
    if (!s.ok || s.mode != sample_mode::new_connection) continue;
    if (s.route.kind == route_kind::vless) ++e.through_vless;
    if (!s.timing.vless) continue;
    if (s.route.session && per_session[*s.route.session] > 1) {
      ++e.shared;
      continue;
    }
    const auto wait = own_phase(s.timing.vless, s);
    const auto tls = own_phase(s.timing.tls, s), up = own_phase(s.timing.upstream, s);
    v.foreign_phases += (wait ? 0 : 1) + (s.timing.tls && !tls ? 1 : 0) + (s.timing.upstream && !up ? 1 : 0);
    if (!wait) continue;
    ++v.with_timing;
    if (post_spacing(s, *wait, e, v) && *wait >= stall_threshold_ms) {
      ++v.spacing_waits;  // the client's spacing, not a wait for an ACK
      continue;
    }
    double w = *wait;
    const auto rtt = s.rtt_ms ? s.rtt_ms : hw.rtt_ms;
    if (hw.round_trips > 0 && rtt) {
      w = std::max(0.0, w - hw.round_trips * *rtt);
      rtts.push_back(*rtt);
    }
    e.vless_all.push_back(w);
    if (tls) e.tls_all.push_back(*tls);
    if (up) e.up_all.push_back(*up);
    if (w >= stall_threshold_ms) {
      ++v.stalled;
      if (s.timing.ack == "on") ++e.quickack_stalled;
      e.vless_st.push_back(w);
      if (tls) e.tls_st.push_back(*tls);
      if (up) e.up_st.push_back(*up);
    }
  }
  return e;
}

// The verdict and its text, once there are samples with timing.
void word_verdict(stall_verdict& v, const stall_evidence& e, bool of_stalled) {
  const std::string count = std::to_string(v.stalled) + "/" + std::to_string(v.with_timing);
  const std::string phases = phase_list(v);
  // One or two slow headers among many are scheduler noise, not a client that waits for an ACK.
  if (v.share >= 0.5) {
    v.verdict = stall_verdict::kind::stall;
    v.text = "STALL: " + count +
             " new connections waited >= 30 ms between TLS done and VLESS header complete "
             "(median phases of those " +
             std::to_string(v.stalled) + ": " + phases + "): the client holds its first data until the server ACKs";
    // The daemon says which ACK policy the listener had (Server-Timing ack): with QUICKACK on its
    // ACKs leave at once, so a client still waiting for one is not talking to it directly.
    if (e.quickack_stalled * 2 >= v.stalled) {
      v.terminated_in_between = true;
      v.text +=
          "; the listener has QUICKACK on, so the daemon's ACKs do not reach the client: something "
          "between client and daemon terminates TCP (a user-space port forward such as qemu hostfwd, "
          "VirtualBox NAT, socat: docs/methodology.md)";
    } else {
      v.text += " (Nagle meets delayed ACK; a listener with quickack = \"on\" removes it)";
    }
  } else if (of_stalled) {
    v.verdict = stall_verdict::kind::intermittent;
    v.text = "intermittent stall: " + count +
             " new connections waited >= 30 ms for the VLESS header (median phases of those " +
             std::to_string(v.stalled) + ": " + phases + ")";
  } else {
    v.verdict = stall_verdict::kind::none;
    v.text = "no stall: " + count + " new connections with a VLESS header wait >= 30 ms (max " +
             fmt_ms(v.max_vless_ms) + " ms; median phases of all " + std::to_string(v.with_timing) + ": " + phases +
             ")";
  }
}

}  // namespace

header_wait header_wait_of(const path_spec& path, std::span<const sample> fresh, const vless_client_options& client) {
  header_wait h;
  std::vector<double> rtts;
  for (const auto& s : fresh)
    if (s.ok && s.rtt_ms) rtts.push_back(*s.rtt_ms);
  h.rtt_ms = median_of(rtts);
  if (!path.link || path.mux) return h;
  const auto& t = path.link->transport;
  if (t.upgrades() && t.max_early_data == 0) {
    h.round_trips = 1;
    h.why = std::string(to_string(t.kind)) + " without early data: the header follows the 101 by a round trip";
  } else if (!client.nodelay) {
    // Nagle holds the client's next small write until its last one is ACKed: with QUICKACK the
    // ACK comes at once and still takes the round trip; a delayed ACK adds its timer on top.
    h.round_trips = 1;
    h.why = "Nagle-prone client: its held write follows the ACK of the last one by a round trip";
  }
  return h;
}

namespace {

// What the packet-up spacing cost, named so that it is not read as a stall.
std::string spacing_note(stall_verdict& v, const stall_evidence& e) {
  if (v.spaced == 0) return "";
  v.post_gap_ms = median_of(e.gaps);
  v.post_gap_max_ms = *std::max_element(e.gap_maxes.begin(), e.gap_maxes.end());
  std::string out = "; packet-up POST spacing: " + std::to_string(v.spaced) + "/" + std::to_string(v.with_timing) +
                    " new connections' uplink POSTs were >= 30 ms apart (median gap " + fmt_ms(v.post_gap_ms) +
                    " ms, max " + fmt_ms(v.post_gap_max_ms) +
                    " ms): the client's own spacing (Xray's scMinPostsIntervalMs), not Nagle";
  if (v.spacing_waits > 0)
    out += "; " + std::to_string(v.spacing_waits) + " VLESS header waits >= 30 ms were that spacing, not stalls";
  return out;
}

std::string subtracted_note(const stall_verdict& v, const header_wait& hw) {
  if (v.rtts_subtracted == 0) return "";
  return "; waits less " + std::to_string(v.rtts_subtracted) + " measured RTT (median " + fmt_ms(v.rtt_subtracted_ms) +
         " ms; " + hw.why + ")";
}

}  // namespace

stall_verdict judge_stall(std::span<const sample> new_connection_samples, const header_wait& wait) {
  const auto& hw = wait;
  stall_verdict v;
  std::vector<double> rtts;
  const stall_evidence e = gather_phases(new_connection_samples, hw, v, rtts);
  if (!rtts.empty()) {
    v.rtts_subtracted = hw.round_trips;
    v.rtt_subtracted_ms = median_of(rtts);
  }
  const std::string foreign =
      v.foreign_phases == 0 ? ""
                            : "; " + std::to_string(v.foreign_phases) +
                                  " server phases longer than their whole sample left out (not that sample's own: "
                                  "a mux sub's phases are its shared session's)";
  v.shared_session_samples = e.shared;
  if (v.with_timing == 0 && e.shared > 0) {
    v.text = "no server timing of their own: the " + std::to_string(e.shared) +
             " new-connection samples were subs of shared mux sessions, whose phases were timed once for the "
             "session";
    return v;
  }
  if (v.with_timing == 0) {
    v.text = e.through_vless > 0
                 ? "no server timing: " + std::to_string(e.through_vless) +
                       " new connections went through the daemon's VLESS listener (see routes), but their answers "
                       "carried no phases (this target kind sends no Server-Timing)" +
                       foreign
                 : "no server timing: new connections did not pass the vlessbench daemon's VLESS listener";
    return v;
  }
  v.share = static_cast<double>(v.stalled) / static_cast<double>(v.with_timing);
  if (e.vless_all.empty()) {  // every wait was packet-up's spacing
    v.verdict = stall_verdict::kind::none;
    v.text = "no stall: 0/" + std::to_string(v.with_timing) + " new connections waited for an ACK" +
             spacing_note(v, e) + foreign;
    return v;
  }
  v.vless_sorted_ms = e.vless_all;
  std::sort(v.vless_sorted_ms.begin(), v.vless_sorted_ms.end());
  v.max_vless_ms = *std::max_element(e.vless_all.begin(), e.vless_all.end());
  // Stall and intermittent quote the stalled samples (the evidence of where their time went);
  // "none" quotes every sample, so its medians are the ones samples.csv gives.
  const bool of_stalled = v.share >= 0.5 || (v.stalled >= 2 && v.share >= 0.05);
  v.phases_of_stalled = of_stalled;
  v.tls_ms = median_of(of_stalled ? e.tls_st : e.tls_all);
  v.vless_ms = median_of(of_stalled ? e.vless_st : e.vless_all);
  v.upstream_ms = median_of(of_stalled ? e.up_st : e.up_all);

  word_verdict(v, e, of_stalled);
  v.text += spacing_note(v, e);
  v.text += subtracted_note(v, hw);
  v.text += foreign;
  if (e.shared > 0)
    v.text +=
        "; " + std::to_string(e.shared) + " samples on shared mux sessions left out (their phases are the session's)";
  return v;
}

}  // namespace vlessbench::runner
