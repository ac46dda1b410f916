#include "server/admin_views.hpp"

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/wire/route_header.hpp"

namespace vlessbench::admin {
namespace {

// Shortest round-tripping text of a double, as Prometheus parses it.
std::string num(double v) { return fmt::format("{}", v); }

class exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, std::string_view labels, std::string_view value) {
    if (labels.empty())
      fmt::format_to(std::back_inserter(out_), "{} {}\n", name, value);
    else
      fmt::format_to(std::back_inserter(out_), "{}{{{}}} {}\n", name, labels, value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string label(std::string_view name, std::string_view value) {
  return fmt::format("{}=\"{}\"", name, escape_label(value));
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// The daemon as a whole: build, config generation, reloads, what is open, the log's drops, probe runs.
void daemon_metrics(exposition& m, const hub_snapshot& s, std::string_view version) {
  m.family("vlessbench_build_info", "gauge", "Always 1; the version label is the daemon's.");
  m.sample("vlessbench_build_info", label("version", version), "1");
  m.family("vlessbench_config_generation", "gauge",
           "Generation of the running config (1 at start, +1 per reload that "
           "took).");
  m.sample("vlessbench_config_generation", "", std::to_string(s.generation));
  m.family("vlessbench_reloads_total", "counter", "Reloads (SIGHUP) by outcome.");
  m.sample("vlessbench_reloads_total", label("result", "ok"), std::to_string(s.reloads_ok));
  m.sample("vlessbench_reloads_total", label("result", "failed"), std::to_string(s.reloads_failed));
  m.family("vlessbench_open_sessions", "gauge", "Authorised VLESS sessions open now.");
  m.sample("vlessbench_open_sessions", "", std::to_string(s.open_sessions));
  m.family("vlessbench_open_connections", "gauge", "Connections open now (VLESS and targets).");
  m.sample("vlessbench_open_connections", "", std::to_string(s.open_connections));
  m.family("vlessbench_access_log_dropped_lines_total", "counter",
           "Access-log lines dropped: the reader did not keep up (queue), over [log] max_lines_per_second (rate) "
           "or over [log] max_session_lines_per_second (session_rate).");
  m.sample("vlessbench_access_log_dropped_lines_total", label("reason", "queue"), std::to_string(s.log_dropped_queue));
  m.sample("vlessbench_access_log_dropped_lines_total", label("reason", "rate"), std::to_string(s.log_dropped_rate));
  m.sample("vlessbench_access_log_dropped_lines_total", label("reason", "session_rate"),
           std::to_string(s.log_dropped_session_rate));
  m.family("vlessbench_probe_runs_total", "counter", "Browser probe results accepted (probe.run events).");
  m.sample("vlessbench_probe_runs_total", "", std::to_string(s.probe_runs));
}

// What the probe, the admin listener and the UDP targets refused, by reason.
void refusal_metrics(exposition& m, const hub_snapshot& s) {
  m.family("vlessbench_probe_results_refused_total", "counter",
           "Browser probe results refused, by reason (docs/probe.md).");
  for (const auto& [reason, n] : s.probe_refused)
    m.sample("vlessbench_probe_results_refused_total", label("reason", reason), std::to_string(n));
  m.family("vlessbench_admin_refused_total", "counter",
           "Admin connections and requests refused, by reason (docs/dashboard.md).");
  for (const auto& [reason, n] : s.admin_refused)
    m.sample("vlessbench_admin_refused_total", label("reason", reason), std::to_string(n));
  m.family("vlessbench_udp_refused_total", "counter",
           "Datagrams the UDP echo and the DNS responder did not answer, by listener and reason "
           "(docs/target.md).");
  for (const auto& [name, reasons] : s.udp_refused)
    for (const auto& [reason, n] : reasons)
      m.sample("vlessbench_udp_refused_total", label("listener", name) + "," + label("reason", reason),
               std::to_string(n));
}

// UDP targets (docs/target.md "No amplifier"): the echo's answers and bytes, DNS rate limiting.
void udp_answer_metrics(exposition& m, const hub_snapshot& s) {
  m.family("vlessbench_udp_echo_datagrams_total", "counter",
           "Datagrams the UDP echo took, by answer: full (route trailer), short (too short for it), none.");
  // Each family for the listeners it concerns: one that took a datagram, one that judged a query.
  const auto echo_seen = [](const udp_answer_counters& c) {
    return c.echo_full + c.echo_short + c.echo_unanswered > 0;
  };
  const auto rrl_seen = [](const udp_answer_counters& c) { return c.rrl_answered + c.rrl_slipped + c.rrl_dropped > 0; };
  for (const auto& [name, c] : s.udp_answers) {
    if (!echo_seen(c)) continue;
    m.sample("vlessbench_udp_echo_datagrams_total", label("listener", name) + ",answer=\"full\"",
             std::to_string(c.echo_full));
    m.sample("vlessbench_udp_echo_datagrams_total", label("listener", name) + ",answer=\"short\"",
             std::to_string(c.echo_short));
    m.sample("vlessbench_udp_echo_datagrams_total", label("listener", name) + ",answer=\"none\"",
             std::to_string(c.echo_unanswered));
  }
  m.family("vlessbench_udp_echo_bytes_total", "counter",
           "Bytes the UDP echo took (in) and sent (out); out never exceeds in.");
  for (const auto& [name, c] : s.udp_answers) {
    if (!echo_seen(c)) continue;
    m.sample("vlessbench_udp_echo_bytes_total", label("listener", name) + ",direction=\"in\"",
             std::to_string(c.echo_bytes_in));
    m.sample("vlessbench_udp_echo_bytes_total", label("listener", name) + ",direction=\"out\"",
             std::to_string(c.echo_bytes_out));
  }
  m.family("vlessbench_dns_rrl_responses_total", "counter",
           "DNS answers over UDP that response rate limiting judged, by action: answered, slipped (sent "
           "truncated, TC), dropped.");
  for (const auto& [name, c] : s.udp_answers) {
    if (!rrl_seen(c)) continue;
    m.sample("vlessbench_dns_rrl_responses_total", label("listener", name) + ",action=\"answered\"",
             std::to_string(c.rrl_answered));
    m.sample("vlessbench_dns_rrl_responses_total", label("listener", name) + ",action=\"slipped\"",
             std::to_string(c.rrl_slipped));
    m.sample("vlessbench_dns_rrl_responses_total", label("listener", name) + ",action=\"dropped\"",
             std::to_string(c.rrl_dropped));
  }
}

// One series per configured listener, its kind and socket policy as labels (value 1), to join
// the counters below on `listener`; what each target answered.
void listener_metrics(exposition& m, const hub_snapshot& s) {
  m.family(
      "vlessbench_listener_info", "gauge",
      "Always 1 per configured listener; labels: kind, address, socket policy (accepted and upstream), transport.");
  for (const auto& l : s.listeners)
    m.sample("vlessbench_listener_info",
             label("listener", l.name) + "," + label("kind", l.kind) + "," + label("listen", l.listen) + "," +
                 label("policy", l.policy) + "," + label("upstream_policy", l.upstream_policy) + "," +
                 label("transport", l.transport),
             "1");
  // Path emulation (emulate = {...}): what netem adds to what the host sends on the listener's port.
  const auto gauge = [&](const char* name, const char* help, auto value) {
    m.family(name, "gauge", help);
    for (const auto& l : s.listeners) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", value(l));
      m.sample(name, label("listener", l.name), buf);
    }
  };
  gauge("vlessbench_listener_emulated_delay_seconds",
        "netem delay on what the host sends from the listener's port (emulate.delay_ms / 1000; 0: none).",
        [](const listener_view& l) { return l.emulate_delay_ms / 1000.0; });
  gauge("vlessbench_listener_emulated_loss_ratio",
        "netem loss on what the host sends from the listener's port (emulate.loss_pct / 100).",
        [](const listener_view& l) { return l.emulate_loss_pct / 100; });
  m.family("vlessbench_target_answers_total", "counter",
           "What a target answered (HTTP/HTTPS requests, UDP echo datagrams at the flow's end, DNS queries, banner "
           "connections), by route.");
  for (const auto& l : s.listeners) {
    if (l.kind == "vless") continue;
    const auto it = s.counters.find(l.name);
    const std::uint64_t all = it == s.counters.end() ? 0 : it->second.answers;
    const std::uint64_t vless = it == s.counters.end() ? 0 : it->second.answers_vless;
    m.sample("vlessbench_target_answers_total", label("listener", l.name) + ",route=\"vless\"", std::to_string(vless));
    m.sample("vlessbench_target_answers_total", label("listener", l.name) + ",route=\"direct\"",
             std::to_string(all - vless));
  }
}

// The VLESS sessions' counters, per listener.
void session_metrics(exposition& m, const hub_snapshot& s) {
  m.family("vlessbench_sessions_total", "counter", "Admitted VLESS sessions, counted at close.");
  for (const auto& [name, c] : s.counters)
    m.sample("vlessbench_sessions_total", label("listener", name), std::to_string(c.sessions));
  m.family("vlessbench_stalls_suspected_total", "counter",
           "Sessions whose wait for the VLESS header after TLS reached the "
           "stall threshold.");
  for (const auto& [name, c] : s.counters)
    m.sample("vlessbench_stalls_suspected_total", label("listener", name), std::to_string(c.stalls));
  m.family("vlessbench_xhttp_reused_sessions_total", "counter",
           "XHTTP sessions on an HTTP/2 connection that had carried earlier sessions (XMUX), counted at close.");
  for (const auto& l : s.listeners) {
    if (l.transport != "xhttp") continue;
    const auto it = s.counters.find(l.name);
    m.sample("vlessbench_xhttp_reused_sessions_total", label("listener", l.name),
             std::to_string(it == s.counters.end() ? 0 : it->second.xhttp_reused));
  }
  m.family("vlessbench_rejects_total", "counter", "Connections refused before relaying (vless.reject), by reason.");
  for (const auto& [name, c] : s.counters)
    for (const auto& [reason, n] : c.rejects)
      m.sample("vlessbench_rejects_total", label("listener", name) + "," + label("reason", reason), std::to_string(n));
  m.family("vlessbench_bytes_total", "counter",
           "Payload bytes, by direction (up: towards the daemon): relayed by VLESS sessions that closed; a target's "
           "requests and answers.");
  for (const auto& [name, c] : s.counters) {
    m.sample("vlessbench_bytes_total", label("listener", name) + ",direction=\"up\"", std::to_string(c.bytes_up));
    m.sample("vlessbench_bytes_total", label("listener", name) + ",direction=\"down\"", std::to_string(c.bytes_down));
  }
}

void phase_metrics(exposition& m, const hub_snapshot& s) {
  m.family("vlessbench_phase_seconds", "histogram",
           "Session phases: TLS handshake, wait for the VLESS header, upstream connect; xhttp_post_gap: an XHTTP "
           "packet-up session's longest gap between uplink POSTs.");
  for (const auto& [name, c] : s.counters) {
    for (std::size_t i = 0; i < hub_phases.size(); ++i) {
      const auto& h = c.phases[i];
      if (hub_phases[i] == hub_phase::xhttp_post_gap && h.count == 0) continue;  // no packet-up session here
      const std::string base = label("listener", name) + "," + label("phase", to_string(hub_phases[i]));
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < phase_buckets_ms.size(); ++b) {
        cumulative += h.buckets[b];
        m.sample("vlessbench_phase_seconds_bucket", base + ",le=\"" + num(phase_buckets_ms[b] / 1000.0) + "\"",
                 std::to_string(cumulative));
      }
      m.sample("vlessbench_phase_seconds_bucket", base + ",le=\"+Inf\"", std::to_string(h.count));
      m.sample("vlessbench_phase_seconds_sum", base, num(h.sum_ms / 1000.0));
      m.sample("vlessbench_phase_seconds_count", base, std::to_string(h.count));
    }
  }
}

// A listener as the dashboard shows it: a listener nothing has reached yet shows zeros, not missing
// fields.
nlohmann::json listener_json(const listener_view& l, const hub_snapshot& s) {
  using nlohmann::json;
  json o{{"kind", l.kind},
         {"name", l.name},
         {"listen", l.listen},
         {"policy", l.policy},
         {"upstream_policy", l.upstream_policy},
         {"transport", l.transport},
         {"emulate", l.emulate}};
  static const listener_counters none{};
  const auto it = s.counters.find(l.name);
  const auto& c = it != s.counters.end() ? it->second : none;
  o["sessions"] = c.sessions;
  o["stalls"] = c.stalls;
  o["xhttp_reused"] = c.xhttp_reused;
  o["spacing_waits"] = c.spacing_waits;
  o["bytes_up"] = c.bytes_up;
  o["bytes_down"] = c.bytes_down;
  o["rejects"] = c.rejects;
  o["answers"] = c.answers;
  o["answers_vless"] = c.answers_vless;
  o["policy_changed_unix_ms"] = c.policy_changed_unix_ms ? json(c.policy_changed_unix_ms) : json(nullptr);
  o["stalls_before_policy_change"] = c.stalls_before_policy_change;
  json phases = json::object();
  for (std::size_t i = 0; i < hub_phases.size(); ++i)
    phases[std::string(to_string(hub_phases[i]))] =
        json{{"buckets", c.phases[i].buckets}, {"count", c.phases[i].count}, {"sum_ms", c.phases[i].sum_ms}};
  o["phases"] = phases;
  return o;
}

nlohmann::json session_json(const session_record& r) {
  return nlohmann::json({{"id", r.id},
                         {"closed_unix_ms", r.closed_unix_ms},
                         {"listener", r.listener},
                         {"user", r.user},
                         {"client", r.client},
                         {"dest", r.dest},
                         {"transport", r.transport},
                         {"tls_version", r.tls_version},
                         {"alpn", r.alpn},
                         {"sni", r.sni},
                         {"ja4", r.ja4},
                         {"quickack", r.quickack},
                         {"tls_ms", opt(r.tls_ms)},
                         {"vless_header_ms", opt(r.header_ms)},
                         {"upstream_connect_ms", opt(r.upstream_ms)},
                         {"stall", r.stall},
                         {"xhttp_get_ms", opt(r.xhttp_get_ms)},
                         {"xhttp_first_post_ms", opt(r.xhttp_first_post_ms)},
                         {"post_gaps", r.post_gaps ? nlohmann::json(*r.post_gaps) : nlohmann::json(nullptr)},
                         {"post_gap_median_ms", opt(r.post_gap_median_ms)},
                         {"post_gap_max_ms", opt(r.post_gap_max_ms)},
                         {"reused", r.reused ? nlohmann::json(*r.reused) : nlohmann::json(nullptr)},
                         {"post_spacing", r.post_spacing},
                         {"bytes_up", r.bytes_up},
                         {"bytes_down", r.bytes_down},
                         {"close_reason", r.close_reason}});
}

nlohmann::json probe_json(const probe_record& p) {
  return nlohmann::json({{"unix_ms", p.unix_ms},
                         {"listener", p.listener},
                         {"peer", p.peer},
                         {"user_agent", p.user_agent},
                         {"run", p.run},
                         {"verdict", p.verdict},
                         {"page_verdict", p.page_verdict},
                         {"new", p.new_count},
                         {"reuse", p.reuse_count},
                         {"ok", p.ok},
                         {"failed", p.failed},
                         {"vless_samples", p.vless_samples},
                         {"direct_samples", p.direct_samples},
                         {"stall_samples", p.stall_samples},
                         {"new_median_ms", opt(p.new_median_ms)},
                         {"reuse_median_ms", opt(p.reuse_median_ms)}});
}

}  // namespace

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_metrics(const hub_snapshot& s, std::string_view version) {
  exposition m;
  daemon_metrics(m, s, version);
  refusal_metrics(m, s);
  udp_answer_metrics(m, s);
  listener_metrics(m, s);
  session_metrics(m, s);
  phase_metrics(m, s);
  return m.take();
}

std::string format_state_json(const hub_snapshot& s, std::string_view version) {
  using nlohmann::json;
  json j;
  j["version"] = version;
  j["started_unix_ms"] = s.started_unix_ms;
  j["now_unix_ms"] = state_hub::now_unix_ms();
  j["generation"] = s.generation;
  j["open_sessions"] = s.open_sessions;
  j["open_connections"] = s.open_connections;
  j["stall_threshold_ms"] = stall_threshold_ms;
  j["reloads_ok"] = s.reloads_ok;
  j["reloads_failed"] = s.reloads_failed;
  j["probe_runs"] = s.probe_runs;
  j["udp_refused"] = s.udp_refused;
  j["buckets_ms"] = phase_buckets_ms;
  json listeners = json::array();
  for (const auto& l : s.listeners) listeners.push_back(listener_json(l, s));
  j["listeners"] = std::move(listeners);
  json sessions = json::array();
  for (const auto& r : s.sessions) sessions.push_back(session_json(r));
  j["sessions"] = std::move(sessions);
  json reloads = json::array();
  for (const auto& r : s.reloads) {
    json o{{"unix_ms", r.unix_ms}, {"ok", r.ok}, {"generation", r.generation}, {"error", r.error}};
    o["changes"] = r.changes ? json(*r.changes) : json(nullptr);
    reloads.push_back(std::move(o));
  }
  j["reloads"] = std::move(reloads);
  json probes = json::array();
  for (const auto& p : s.probes) probes.push_back(probe_json(p));
  j["probes"] = std::move(probes);
  // Bytes from the network need not be UTF-8: replaced, never a throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace vlessbench::admin
