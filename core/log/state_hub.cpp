#include "core/log/state_hub.hpp"

#include <algorithm>
#include <chrono>

namespace vlessbench {
namespace {

std::string capped(std::string_view s) { return std::string(s.substr(0, hub_max_string)); }

// A phase from `from` to `to` (µs since accept, -1 = not reached), as
// Server-Timing names them.
std::optional<double> span_ms(std::int64_t from, std::int64_t to) {
  if (from < 0 || to < 0 || to < from) return std::nullopt;
  return static_cast<double>(to - from) / 1000.0;
}

template <class T>
void push_bounded(std::deque<T>& ring, T value, std::size_t cap) {
  if (ring.size() >= cap) ring.pop_front();
  ring.push_back(std::move(value));
}

}  // namespace

std::string_view to_string(hub_phase p) {
  switch (p) {
    case hub_phase::tls: return "tls";
    case hub_phase::vless_header: return "vless_header";
    case hub_phase::upstream_connect: return "upstream_connect";
    case hub_phase::xhttp_post_gap: return "xhttp_post_gap";
  }
  return "tls";
}

void phase_histogram::add(double ms) {
  const auto it = std::lower_bound(phase_buckets_ms.begin(), phase_buckets_ms.end(), ms);
  if (it != phase_buckets_ms.end()) ++buckets[static_cast<std::size_t>(it - phase_buckets_ms.begin())];
  ++count;
  sum_ms += ms;
}

std::int64_t state_hub::now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

listener_counters* state_hub::counters_for(std::string_view listener) {
  if (auto it = counters_.find(listener); it != counters_.end()) return &it->second;
  if (counters_.size() >= hub_max_listeners) return nullptr;
  return &counters_[capped(listener)];
}

namespace {
void note_xhttp(session_record& r, const xhttp_phases& x) {
  const auto ms = [](std::int64_t us) {
    return us >= 0 ? std::optional<double>(static_cast<double>(us) / 1000.0) : std::nullopt;
  };
  r.xhttp_get_ms = ms(x.get);
  r.xhttp_first_post_ms = ms(x.first_post);
  if (x.post_gaps >= 0) r.post_gaps = static_cast<std::uint64_t>(x.post_gaps.get());
  r.post_gap_median_ms = ms(x.post_gap_median);
  r.post_gap_max_ms = ms(x.post_gap_max);
}
}  // namespace

void state_hub::session_closed(const vless_session_event& e) {
  session_record r;
  r.id = e.session;
  r.closed_unix_ms = now_unix_ms();
  r.listener = capped(e.listener);
  r.user = capped(e.user);
  r.client = capped(e.client);
  r.dest = capped(e.dest);
  r.transport = capped(e.transport.empty() ? std::string_view("tls") : e.transport);
  r.tls_version = capped(e.tls_version);
  r.alpn = capped(e.alpn);
  r.sni = capped(e.sni);
  r.ja4 = capped(e.ja4);
  r.close_reason = capped(e.close_reason);
  r.quickack = std::string(to_string(e.policy.quickack));
  if (e.phases) {
    const session_phases& p = *e.phases;
    r.tls_ms = span_ms(0, p.tls_done);
    r.header_ms = span_ms(p.upgrade_done >= 0 ? p.upgrade_done : p.tls_done, p.header_complete);
    r.upstream_ms = span_ms(p.resolved >= 0 ? p.resolved : p.header_complete, p.upstream_connected);
    note_xhttp(r, p.xhttp);
  }
  r.stall = e.stall_suspected;
  r.post_spacing = e.post_spacing;
  if (e.reused) r.reused = e.reused;
  r.bytes_up = e.bytes_up;
  r.bytes_down = e.bytes_down;

  const std::lock_guard lock(mutex_);
  if (auto* c = counters_for(r.listener)) {
    ++c->sessions;
    if (r.stall) ++c->stalls;
    if (r.reused.value_or(false)) ++c->xhttp_reused;
    if (r.post_spacing) ++c->spacing_waits;
    c->bytes_up += r.bytes_up;
    c->bytes_down += r.bytes_down;
    const std::array<std::optional<double>, hub_phases.size()> spans{r.tls_ms, r.header_ms, r.upstream_ms,
                                                                     r.post_gap_max_ms};
    for (std::size_t i = 0; i < spans.size(); ++i)
      if (spans[i]) c->phases[i].add(*spans[i]);
  }
  push_bounded(sessions_, std::move(r), session_ring);
}

void state_hub::rejected(const vless_reject_event& e) {
  const std::lock_guard lock(mutex_);
  auto* c = counters_for(e.listener);
  if (!c) return;
  auto it = c->rejects.find(e.reason);
  if (it == c->rejects.end()) {
    const std::string_view reason = c->rejects.size() < hub_max_reasons ? e.reason : std::string_view("other");
    it = c->rejects.try_emplace(capped(reason), 0).first;
  }
  ++it->second;
}

void state_hub::target_answered(std::string_view listener, bool via_vless, std::uint64_t count, std::uint64_t bytes_up,
                                std::uint64_t bytes_down) {
  const std::lock_guard lock(mutex_);
  auto* c = counters_for(listener);
  if (!c) return;
  c->answers += count;
  if (via_vless) c->answers_vless += count;
  c->bytes_up += bytes_up;
  c->bytes_down += bytes_down;
}

void state_hub::reloaded(const config_reload_event& e) {
  reload_record r{now_unix_ms(), e.ok, e.generation, capped(e.error), e.changes};
  const std::lock_guard lock(mutex_);
  ++(e.ok ? reloads_ok_ : reloads_failed_);
  push_bounded(reloads_, std::move(r), reload_ring);
}

probe_record make_probe_record(const probe_run_event& e) {
  probe_record r;
  r.unix_ms = state_hub::now_unix_ms();
  r.listener = capped(e.listener);
  r.peer = capped(e.peer);
  r.user_agent = capped(e.user_agent);
  if (e.result) {
    r.run = capped(e.result->run);
    r.page_verdict = capped(e.result->verdict);
    r.new_count = e.result->new_count;
    r.reuse_count = e.result->reuse_count;
  }
  if (e.summary) {
    const probe_summary& s = *e.summary;
    r.verdict = capped(s.verdict);
    r.ok = s.ok;
    r.failed = s.failed;
    r.vless_samples = s.vless_samples;
    r.direct_samples = s.direct_samples;
    r.stall_samples = s.stall_samples;
    r.new_median_ms = s.new_median_ms;
    r.reuse_median_ms = s.reuse_median_ms;
  }
  return r;
}

void state_hub::probe_run(probe_record r) {
  const std::lock_guard lock(mutex_);
  ++probe_runs_;
  push_bounded(probes_, std::move(r), probe_ring);
}

void state_hub::set_listeners(std::uint64_t generation, std::vector<listener_view> listeners) {
  const std::lock_guard lock(mutex_);
  generation_ = generation;
  const std::int64_t now = now_unix_ms();
  for (const listener_view& l : listeners) {
    const auto before =
        std::find_if(listeners_.begin(), listeners_.end(), [&](const listener_view& o) { return o.name == l.name; });
    if (before == listeners_.end()) continue;
    if (before->policy == l.policy && before->upstream_policy == l.upstream_policy) continue;
    if (auto it = counters_.find(l.name); it != counters_.end()) {
      it->second.policy_changed_unix_ms = now;
      it->second.stalls_before_policy_change = it->second.stalls;
    }
  }
  listeners_ = std::move(listeners);
  std::erase_if(counters_, [&](const auto& kv) {
    return std::none_of(listeners_.begin(), listeners_.end(),
                        [&](const listener_view& l) { return l.name == kv.first; });
  });
  std::erase_if(udp_answers_, [&](const auto& kv) {
    return std::none_of(listeners_.begin(), listeners_.end(),
                        [&](const listener_view& l) { return l.name == kv.first; });
  });
}

udp_answer_counters* state_hub::udp_answers_for(std::string_view listener) {
  auto it = udp_answers_.find(listener);
  if (it != udp_answers_.end()) return &it->second;
  if (udp_answers_.size() >= hub_max_listeners) return nullptr;
  return &udp_answers_.emplace(std::string(listener.substr(0, hub_max_string)), udp_answer_counters{}).first->second;
}

void state_hub::udp_echo_counted(std::string_view listener, udp_echo_form form, std::uint64_t bytes_in,
                                 std::uint64_t bytes_out) {
  const std::lock_guard lock(mutex_);
  udp_answer_counters* c = udp_answers_for(listener);
  if (c == nullptr) return;
  switch (form) {
    case udp_echo_form::full: ++c->echo_full; break;
    case udp_echo_form::short_form: ++c->echo_short; break;
    case udp_echo_form::none: ++c->echo_unanswered; break;
  }
  c->echo_bytes_in += bytes_in;
  c->echo_bytes_out += bytes_out;
}

void state_hub::dns_rrl_counted(std::string_view listener, std::uint64_t answered, std::uint64_t slipped,
                                std::uint64_t dropped) {
  const std::lock_guard lock(mutex_);
  udp_answer_counters* c = udp_answers_for(listener);
  if (c == nullptr) return;
  c->rrl_answered += answered;
  c->rrl_slipped += slipped;
  c->rrl_dropped += dropped;
}

namespace {
void count_reason(std::map<std::string, std::uint64_t, std::less<>>& m, std::string_view reason, std::uint64_t n = 1) {
  auto it = m.find(reason);
  if (it == m.end()) it = m.emplace(std::string(m.size() < hub_max_reasons ? reason : "other"), 0).first;
  it->second += n;
}
}  // namespace

void state_hub::admin_refused(std::string_view reason) {
  const std::lock_guard lock(mutex_);
  count_reason(admin_refused_, reason);
}

void state_hub::probe_refused(std::string_view reason) {
  const std::lock_guard lock(mutex_);
  count_reason(probe_refused_, reason);
}

void state_hub::udp_refused(std::string_view listener, std::string_view reason, std::uint64_t n) {
  const std::lock_guard lock(mutex_);
  auto it = udp_refused_.find(listener);
  if (it == udp_refused_.end()) {
    if (udp_refused_.size() >= hub_max_listeners) return;
    it = udp_refused_.try_emplace(capped(listener)).first;
  }
  count_reason(it->second, reason, n);
}

hub_snapshot state_hub::snapshot() const {
  const std::lock_guard lock(mutex_);
  hub_snapshot s;
  s.started_unix_ms = started_unix_ms_;
  s.generation = generation_;
  s.listeners = listeners_;
  s.counters = counters_;
  s.reloads_ok = reloads_ok_;
  s.reloads_failed = reloads_failed_;
  s.probe_runs = probe_runs_;
  s.admin_refused = admin_refused_;
  s.probe_refused = probe_refused_;
  s.udp_answers = udp_answers_;
  s.udp_refused = udp_refused_;
  s.sessions.assign(sessions_.begin(), sessions_.end());
  s.reloads.assign(reloads_.begin(), reloads_.end());
  s.probes.assign(probes_.begin(), probes_.end());
  return s;
}

}  // namespace vlessbench
