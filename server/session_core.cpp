#include "server/session_core.hpp"

#include <fmt/format.h>

#include "core/log/logging.hpp"
#include "core/wire/route_header.hpp"
#include "server/admission.hpp"
#include "server/refusal_log.hpp"

namespace vlessbench::vless_server::detail {

session_core::session_core(runtime& r, session_start& start)
    : rt(r),
      listener(std::move(start.listener)),
      tls_ctx(std::move(start.tls)),
      cfg(std::move(start.cfg)),
      listener_name(std::move(start.listener_name)),
      budget(start.budget ? std::move(start.budget) : r.clients.connect(start.client.address())),
      accepted(start.began),
      admission(std::move(start.pending)),
      policy_at_accept(start.policy),
      upstream_policy_applied(start.upstream_policy),
      emulate_at_accept(start.emulate),
      generation_at_accept(start.generation) {
  info->session_id = start.session_id;
  info->listener = listener_name;
  info->quickack = std::string(to_string(policy_at_accept.quickack));
  info->generation = generation_at_accept;
  info->client = format_endpoint(start.client);
}

std::string_view to_string(session_phase p) {
  switch (p) {
    case session_phase::tls: return "tls";
    case session_phase::header: return "header";
    case session_phase::resolve: return "resolve";
    case session_phase::connect: return "connect";
    case session_phase::relay: return "relay";
    case session_phase::close: return "close";
  }
  return "unknown";
}

void session_ending::record(cause c, bool after_relay) {
  if (what_ != cause::none) return;
  what_ = c;
  after_relay_ = after_relay;
}

close_reason session_ending::settle(close_reason relay) const {
  // How the relay ended decides the reason; cutting the bounded TLS shutdown after it does not
  // (a client that ignores close_notify was logged "timeout").
  if (relay == close_reason::rejected || after_relay_) return relay;
  switch (what_) {
    case cause::timeout: return close_reason::timeout;
    case cause::drain: return close_reason::drain;
    case cause::user_removed: return close_reason::user_removed;
    case cause::slow_transfer: return close_reason::slow_transfer;
    case cause::none:
    case cause::evicted: break;
  }
  return relay;
}

bool session_core::is_sing_mux() const { return is_sing_mux_request(header); }

bool session_core::rate_sample_failed(steady_clock::time_point now, std::uint64_t client_delivered,
                                      std::uint64_t upstream_acked) {
  const std::uint64_t need = cfg->limits.min_rate_bytes;
  const bool client_ok = to_client.on_window(down_writing, client_delivered, need);
  const bool upstream_ok = to_upstream.on_window(up_writing, upstream_acked, need);
  if (!client_ok || !upstream_ok) {
    spdlog::debug("vless {} session {}: slow_transfer towards the {}", listener_name, info->session_id,
                  client_ok ? "destination" : "client");
    end_by(session_ending::cause::slow_transfer);
    return true;
  }
  // Keep sampling while data moves or waits; a whole window without either: idle, no samples
  // until the next transfer.
  const bool active = down_writing || up_writing || last_transfer + cfg->limits.min_rate_window > now;
  sample_at = active ? now + cfg->limits.min_rate_window : steady_clock::time_point::max();
  deadline = next_deadline();
  return false;
}

void session_core::reject(std::string_view why, std::string detail) {
  reason = close_reason::rejected;
  reject_reason = why;
  reject_detail = std::move(detail);
}

void session_core::reject_io(reject_code on_timeout, std::string_view on_failure, std::string detail) {
  switch (ending.what()) {
    case session_ending::cause::evicted: return reject(reject_code::evicted, std::move(detail));
    case session_ending::cause::timeout: return reject(on_timeout, std::move(detail));
    case session_ending::cause::drain:
      return reject(reject_code::drain);  // not the client's failure ("Operation aborted")
    case session_ending::cause::none:
    case session_ending::cause::user_removed:
    case session_ending::cause::slow_transfer: break;
  }
  reject(on_failure, std::move(detail));
}

void session_core::reject_dial(dial_failure f) {
  if (f.at == dial_failure::step::resolve)
    return reject_io(reject_code::resolve_timeout, f.reason, std::move(f.detail));
  if (f.at == dial_failure::step::connect)
    return reject_io(reject_code::connect_timeout, f.reason, std::move(f.detail));
  reject(f.reason, std::move(f.detail));
}

bool session_core::admit() {
  auto slot = session_count::try_acquire(rt.vless_sessions, cfg->limits.max_sessions);
  if (!slot) {
    reject(reject_code::too_many_sessions);
    return false;
  }
  auto mine = budget->client().sessions.try_take(cfg->limits.max_sessions_per_client);
  if (!mine) {
    reject(reject_code::too_many_sessions_from_client,
           std::to_string(cfg->limits.max_sessions_per_client) +
               " sessions open from this address ([limits] max_sessions_per_client)");
    return false;
  }
  counted.emplace(std::move(*slot));
  counted_for_client.emplace(std::move(*mine));
  admission.leave();
  return true;
}

void session_core::finish(const transport::facts& t, const relay_summary& r) {
  reason = ending.settle(reason);
  // The session's slots go back before its line is written: a client that saw the line (or
  // the close) may open the next session at once and find the slot free.
  counted_for_client.reset();
  counted.reset();
  if (reason == close_reason::rejected) {
    log_reject(t);
  } else {
    log_session(t, r);
  }
}

namespace {
// A REALITY fallback the session closed under: which of its causes did.
std::string_view fallback_end(std::string_view relay_end, session_ending::cause c) {
  if (relay_end != "closed" && !relay_end.empty()) return relay_end;
  switch (c) {
    case session_ending::cause::timeout: return "deadline";
    case session_ending::cause::drain: return "drain";
    case session_ending::cause::evicted: return "evicted";
    case session_ending::cause::none:
    case session_ending::cause::user_removed:
    case session_ending::cause::slow_transfer: break;
  }
  return "closed";
}
}  // namespace

void session_core::log_reject(const transport::facts& t) {
  std::optional<fallback_facts> fallback = t.fallback;
  if (fallback) fallback->end = fallback_end(fallback->end, ending.what());
  const vless_reject_event event{.session = info->session_id,
                                 .listener = listener_name,
                                 .client = info->client,
                                 .reason = reject_reason,
                                 .phase = to_string(phase_),
                                 .bytes_seen = header_bytes_seen,
                                 .detail = reject_detail,
                                 .user = info->user,
                                 .dest = dest,
                                 .duration_us = info->phases.closed.get(),
                                 .ja4 = t.ja4,
                                 .groups = t.groups,
                                 .key_shares = t.key_shares,
                                 .fallback = fallback};
  rt.events.emit(event);
  spdlog::debug("vless {} session {} from {} rejected: {} ({})", listener_name, info->session_id, info->client,
                reject_reason, reject_detail);
  note_refusal(
      rt, reject_reason,
      fmt::format("{} on {}{}{}", info->client, listener_name, reject_detail.empty() ? "" : ": ", reject_detail));
}

void session_core::log_session(const transport::facts& t, const relay_summary& r) {
  const auto& p = info->phases;
  const bool waited = p.tls_done >= 0 && p.header_complete >= 0 && p.header_complete - p.tls_done >= stall_threshold_us;
  const auto ms = [](std::int64_t us) { return static_cast<double>(us) / 1000.0; };
  const auto ms_if = [&](std::int64_t us) { return us >= 0 ? std::optional<double>(ms(us)) : std::nullopt; };
  // The header wait as Server-Timing's `vless` (from the upgrade, if any), on plain TCP too.
  const std::int64_t from = p.upgrade_done >= 0 ? p.upgrade_done.get() : p.tls_done.get();
  const bool spacing = from >= 0 && p.header_complete >= 0 && p.header_complete - from >= stall_threshold_us &&
                       wait_is_post_spacing(ms(from), ms(p.header_complete - from), ms_if(p.xhttp.first_post),
                                            ms_if(p.xhttp.post_gap_max));
  const bool stall = waited && !spacing;
  const vless_session_event event{.session = info->session_id,
                                  .listener = listener_name,
                                  .user = info->user,
                                  .client = info->client,
                                  .dest = dest,
                                  .cmd = r.mux ? "mux" : (is_udp() ? "udp" : "tcp"),
                                  .tls_version = t.tls_version,
                                  .cipher = t.cipher,
                                  .sni = t.sni,
                                  .alpn = t.alpn,
                                  .ja4 = t.ja4,
                                  .groups = t.groups,
                                  .key_shares = t.key_shares,
                                  .transport = t.transport,
                                  .early_data = t.early_data,
                                  .reused = t.reused,
                                  .emulate = emulate_at_accept.active() ? describe(emulate_at_accept) : std::string(),
                                  .policy = policy_at_accept,
                                  .upstream_policy = upstream_policy_applied,
                                  .generation = generation_at_accept,
                                  .phases = &p,
                                  .stall_suspected = stall,
                                  .post_spacing = spacing,
                                  .tcp_info = tcpi,
                                  .bytes_up = bytes_up,
                                  .bytes_down = bytes_down,
                                  .packets_up = r.packets_up,
                                  .packets_down = r.packets_down,
                                  .subs = r.subs,
                                  .subs_refused = r.subs_refused,
                                  .mux_error = r.mux_error,
                                  .flow = header.flow,
                                  .vision = r.vision,
                                  .sing_mux = r.sing_mux,
                                  .close_reason = to_string(reason)};
  rt.events.emit(event);
  if (stall) {
    spdlog::warn(
        "vless {} session {} from {}: {:.1f} ms between TLS done and VLESS header: suspected "
        "Nagle/delayed-ACK stall (quickack={})",
        listener_name, info->session_id, info->client, static_cast<double>(p.header_complete - p.tls_done) / 1000.0,
        to_string(policy_at_accept.quickack));
  }
}

}  // namespace vlessbench::vless_server::detail
