#include "runner/report.hpp"
#include "runner/number_format.hpp"

#include <algorithm>
#include <sstream>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace vlessbench::runner {

namespace {

std::string fmt_ci(const std::optional<stats::interval>& ci, bool sign = false) {
  if (!ci) return "-";
  return "[" + fmt_ms(ci->low, sign) + ", " + fmt_ms(ci->high, sign) + "]";
}

std::string pad(std::string s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// Stable per-(path, mode) bootstrap seeds, so one run's intervals are reproducible from its seed.
std::uint64_t mix_seed(std::uint64_t seed, std::string_view name, int mode) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  stats::prng r(seed ^ h ^ static_cast<std::uint64_t>(mode));
  return r.next();
}

double round6(double v) { return std::round(v * 1e6) / 1e6; }

}  // namespace

namespace {

// A client's entry (CONNECT, SOCKS5, TUN) over gRPC: the cores keep one HTTP/2 connection to the
// node and open a stream per request, so a "new connection" there is a new stream on a connection
// that exists (as a mux sub is); the built-in client opens a connection per sample.
std::string grpc_entry_note(path_kind kind, std::span<const sample> fresh) {
  if (kind != path_kind::http_connect && kind != path_kind::socks5 && kind != path_kind::tun) return "";
  const auto grpc = std::count_if(fresh.begin(), fresh.end(), [](const sample& s) {
    return s.ok && s.route.kind == route_kind::vless && s.route.transport == "grpc";
  });
  if (grpc == 0) return "";
  return "; gRPC through a client: its " + std::to_string(grpc) +
         " new-connection samples were new streams of the client's shared HTTP/2 connection (one TCP + TLS "
         "connection for all of them), not new connections: compare them with a mux path, not with raw TLS";
}

// XHTTP over h2: which samples rode an HTTP/2 connection that carried earlier sessions.
std::string shared_h2_lines(const std::vector<path_result>& results, std::size_t name_w) {
  std::string lines;
  for (const auto& r : results)
    if (r.shared_h2_fresh + r.shared_h2_reuse > 0)
      lines += "  " + pad(r.name, name_w) + "  " + std::to_string(r.shared_h2_fresh) + " of " +
               std::to_string(r.fresh.attempted) + " new, " + std::to_string(r.shared_h2_reuse) + " of " +
               std::to_string(r.reuse.attempted) +
               " reused samples rode an HTTP/2 connection that carried earlier XHTTP sessions (no handshake)\n";
  return lines.empty() ? "" : "\nshared HTTP/2 connections (XMUX):\n" + lines;
}

}  // namespace

std::vector<path_result> analyze(const std::vector<path_spec>& paths, std::size_t baseline,
                                 const std::vector<sample>& samples, const vless_client_options& defaults,
                                 std::uint64_t seed) {
  // Per path and mode: latency by round (nullopt = failed) for the pairing.
  struct by_round {
    std::vector<std::optional<double>> fresh, reuse;
  };
  std::vector<by_round> rounds(paths.size());
  std::vector<path_result> out(paths.size());
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    index[paths[i].name] = i;
    out[i].name = paths[i].name;
    out[i].kind = paths[i].kind;
    out[i].spec = paths[i].spec;
    out[i].baseline = i == baseline;
    out[i].client = paths[i].client_options(defaults);
  }
  std::vector<std::vector<sample>> fresh_samples(paths.size());
  for (const auto& s : samples) {
    const auto it = index.find(s.path);
    if (it == index.end()) continue;
    auto& r = out[it->second];
    const bool fresh = s.mode == sample_mode::new_connection;
    auto& m = fresh ? r.fresh : r.reuse;
    auto& byr = fresh ? rounds[it->second].fresh : rounds[it->second].reuse;
    if (s.round >= 0 && static_cast<std::size_t>(s.round) >= byr.size())
      byr.resize(static_cast<std::size_t>(s.round) + 1);
    ++m.attempted;
    if (s.ok) {
      m.sorted_ms.push_back(s.ms());
      if (s.inner_tls_ns >= 0) m.inner_tls_ms.push_back(static_cast<double>(s.inner_tls_ns) / 1e6);
      if (s.bytes > 0) m.sorted_mbps.push_back(s.mbps());
      if (s.round >= 0) byr[static_cast<std::size_t>(s.round)] = s.ms();
    } else {
      ++m.failed;
      ++m.errors[s.error.empty() ? "unknown error" : s.error];
      r.last_error = s.error.empty() ? "unknown error" : s.error;
    }
    if (s.status != 0 || s.route.kind != route_kind::unknown) ++r.routes[std::string(to_string(s.route.kind))];
    if (s.ok && s.timing.ack) ++r.server_acks[*s.timing.ack];
    if (s.ok && s.timing.generation) ++r.server_generations[*s.timing.generation];
    if (s.route_mismatch) ++r.route_mismatches;
    if (s.shared_h2) ++(fresh ? r.shared_h2_fresh : r.shared_h2_reuse);
    if (fresh) fresh_samples[it->second].push_back(s);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto& r = out[i];
    for (int mode = 0; mode < 2; ++mode) {
      auto& m = mode == 0 ? r.fresh : r.reuse;
      std::sort(m.sorted_ms.begin(), m.sorted_ms.end());
      m.latency = stats::summarize(m.sorted_ms, mix_seed(seed, r.name, mode));
      std::sort(m.inner_tls_ms.begin(), m.inner_tls_ms.end());
      m.inner_tls_median = stats::median(m.inner_tls_ms);
      m.inner_tls_p95 = stats::quantile(m.inner_tls_ms, 0.95);
      std::sort(m.sorted_mbps.begin(), m.sorted_mbps.end());
      if (!m.sorted_mbps.empty())
        m.mbps = mode_result::throughput{m.sorted_mbps.size(), *stats::median(m.sorted_mbps),
                                         stats::sorted_quantile(m.sorted_mbps, 0.05),
                                         stats::sorted_quantile(m.sorted_mbps, 0.95)};
      if (i == baseline) continue;
      const auto& mine = mode == 0 ? rounds[i].fresh : rounds[i].reuse;
      const auto& base = mode == 0 ? rounds[baseline].fresh : rounds[baseline].reuse;
      m.paired_deltas = stats::paired_differences(mine, base);
      m.paired_delta_median = stats::median(m.paired_deltas);
      m.paired_delta_ci = stats::bootstrap_median_ci(m.paired_deltas, mix_seed(seed, r.name, mode + 2));
    }
    r.stall = judge_stall(fresh_samples[i], header_wait_of(paths[i], fresh_samples[i], r.client));
    // Vision pads the first writes (docs/runner.md "Vision"): the verdict reads the server's
    // phases as before, and says what the padding changes for a Nagle-prone client.
    if (paths[i].link && !paths[i].link->flow.empty() && r.stall.verdict != stall_verdict::kind::no_data)
      r.stall.text +=
          "; Vision: the first write is padded (900-1399 bytes with a TLS handshake inside, "
          "0-255 without), so past one TCP segment its tail waits for an ACK under Nagle";
    r.stall.text += grpc_entry_note(paths[i].kind, fresh_samples[i]);
  }
  fit_round_trip_families(paths, out, fresh_samples);
  return out;
}

std::string format_server_seen(const std::map<std::string, std::size_t>& acks,
                               const std::map<std::uint64_t, std::size_t>& generations) {
  auto list = [](const auto& counts) {
    std::string out;
    for (const auto& [key, n] : counts) {
      std::ostringstream k;
      k << key;
      out += (out.empty() ? "" : " + ") + k.str() + (counts.size() > 1 ? " " + std::to_string(n) : "");
    }
    return out;
  };
  std::string out;
  if (!acks.empty()) out = "ack " + list(acks);
  if (!generations.empty()) out += (out.empty() ? "" : ", ") + std::string("generation ") + list(generations);
  return out;
}

namespace {

// Each path's routes as its answers named them, the server's ACK policy and config generation
// (Server-Timing), and its route mismatches.
std::string route_lines(const std::vector<path_result>& results, std::size_t name_w) {
  std::string routes;
  for (const auto& r : results) {
    std::string counts;
    for (const auto& [route, n] : r.routes) counts += (counts.empty() ? "" : ", ") + route + " " + std::to_string(n);
    routes += "  " + pad(r.name, name_w) + "  " + (counts.empty() ? "no responses" : counts);
    if (const auto seen = format_server_seen(r.server_acks, r.server_generations); !seen.empty())
      routes += " (server: " + seen + ")";
    if (r.route_mismatches > 0)
      routes += "  ROUTE MISMATCH x" + std::to_string(r.route_mismatches) +
                (r.kind == path_kind::direct ? " (baseline went through VLESS)"
                 : r.kind == path_kind::tun  ? " (tun path answered directly: the client's TUN did not capture it)"
                                             : " (proxy path answered directly)");
    routes += "\n";
  }
  return routes;
}

}  // namespace

std::string format_table(const std::vector<path_result>& results) {
  std::size_t name_w = 4;
  for (const auto& r : results) name_w = std::max(name_w, r.name.size());
  std::string t;
  auto row = [&](const std::vector<std::string>& cells) {
    static const std::size_t widths[] = {0, 5, 5, 4, 9, 20, 9, 9, 9, 9, 22};
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::size_t w = i == 0 ? name_w : widths[i];
      line += pad(cells[i], w, i >= 2 && i != 5 && i != 10);
      if (i + 1 < cells.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    t += line + "\n";
  };
  row({"path", "mode", "n", "fail", "median", "median 95% CI", "p95", "min", "max", "paired d", "paired d 95% CI"});
  for (const auto& r : results) {
    for (int mode = 0; mode < 2; ++mode) {
      const auto& m = mode == 0 ? r.fresh : r.reuse;
      if (m.attempted == 0) continue;
      const auto& l = m.latency;
      row({r.name, mode == 0 ? "new" : "reuse", std::to_string(l ? l->n : 0), std::to_string(m.failed),
           fmt_ms(l ? std::optional(l->median) : std::nullopt), fmt_ci(l ? l->median_ci : std::nullopt),
           fmt_ms(l ? std::optional(l->p95) : std::nullopt), fmt_ms(l ? std::optional(l->min) : std::nullopt),
           fmt_ms(l ? std::optional(l->max) : std::nullopt),
           r.baseline ? "baseline" : fmt_ms(m.paired_delta_median, true),
           r.baseline ? "" : fmt_ci(m.paired_delta_ci, true)});
    }
  }
  t += "(ms; paired d = median over rounds of (this path - baseline in the same round))\n";

  const std::string routes = route_lines(results, name_w);
  t += "\nroutes (as the target named them: X-Vlessbench-Route, banner line, UDP echo trailer, DNS route TXT):\n" +
       routes;

  t += shared_h2_lines(results, name_w);

  std::string failures;
  for (const auto& r : results)
    for (int mode = 0; mode < 2; ++mode)
      for (const auto& [why, n] : (mode == 0 ? r.fresh : r.reuse).errors)
        failures += "  " + pad(r.name, name_w) + "  " + (mode == 0 ? "new  " : "reuse") + "  " + std::to_string(n) +
                    " x " + why + "\n";
  if (!failures.empty()) t += "\nfailures:\n" + failures;

  std::string inner, bulk;
  for (const auto& r : results) {
    for (int mode = 0; mode < 2; ++mode) {
      const auto& m = mode == 0 ? r.fresh : r.reuse;
      const std::string label = "  " + pad(r.name, name_w) + "  " + (mode == 0 ? "new  " : "reuse") + "  ";
      if (m.inner_tls_median)
        inner += label + "median " + fmt_ms(m.inner_tls_median) + "  p95 " + fmt_ms(m.inner_tls_p95) + "  (n " +
                 std::to_string(m.inner_tls_ms.size()) + ")\n";
      if (m.mbps) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "median %.1f  p5 %.1f  p95 %.1f  (n %zu)", m.mbps->median, m.mbps->p5,
                      m.mbps->p95, m.mbps->n);
        bulk += label + buf + "\n";
      }
    }
  }
  if (!inner.empty()) t += "\ninner TLS handshake with the target (ms, part of the new-connection time):\n" + inner;
  if (!bulk.empty()) t += "\nthroughput (MB/s = 10^6 bytes/s; the client's view, `verify` adds the server's):\n" + bulk;

  const bool applicable = std::any_of(results.begin(), results.end(), [](const path_result& r) {
    return r.stall.verdict != stall_verdict::kind::not_applicable;
  });
  if (!applicable && !results.empty()) {
    t += "\nstall verdict: " + results.front().stall.text + "\n";
    return t;
  }
  t += format_round_trips(results, name_w);
  t += "\nstall verdict (server phase TLS done -> VLESS header >= 30 ms):\n";
  for (const auto& r : results) t += "  " + pad(r.name, name_w) + "  " + r.stall.text + "\n";
  return t;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::vector<std::string> parse_csv_line(std::string_view line) {
  std::vector<std::string> out;
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cell));
      cell.clear();
    } else if (c != '\r') {
      cell += c;
    }
  }
  out.push_back(std::move(cell));
  return out;
}

std::string samples_csv(const std::vector<sample>& samples) {
  std::string out =
      "round,path,mode,seq,ns,ok,error,status,route,session,user,tls_ms,vless_ms,resolve_ms,"
      "upstream_ms,route_mismatch,inner_tls_ms,bytes,mbps,transport,upgrade_ms,flow,shared_h2,xpost_ms,post_gap_ms,"
      "post_gap_max_ms\n";
  auto opt = [](const std::optional<double>& v) { return v && std::isfinite(*v) ? fmt_ms(v) : std::string(); };
  for (const auto& s : samples) {
    out += std::to_string(s.round) + ',' + csv_field(s.path) + ',' + std::string(to_string(s.mode)) + ',' +
           std::to_string(s.seq) + ',' + std::to_string(s.ns) + ',' + (s.ok ? "1" : "0") + ',' + csv_field(s.error) +
           ',' + (s.status ? std::to_string(s.status) : std::string()) + ',' + std::string(to_string(s.route.kind)) +
           ',' + (s.route.session ? std::to_string(*s.route.session) : std::string()) + ',' + csv_field(s.route.user) +
           ',' + opt(s.timing.tls) + ',' + opt(s.timing.vless) + ',' + opt(s.timing.resolve) + ',' +
           opt(s.timing.upstream) + ',' + (s.route_mismatch ? "1" : "0") + ',' +
           (s.inner_tls_ns >= 0 ? fmt_ms(static_cast<double>(s.inner_tls_ns) / 1e6) : std::string()) + ',' +
           (s.bytes ? std::to_string(s.bytes) : std::string()) + ',' +
           (s.bytes && s.ok ? fmt_ms(s.mbps()) : std::string()) + ',' +
           (s.route.kind == route_kind::vless ? csv_field(s.route.transport) : std::string()) + ',' +
           opt(s.timing.upgrade) + ',' + csv_field(s.flow) + ',' + (s.shared_h2 ? "1" : "0") + ',' +
           opt(s.timing.xpost) + ',' + opt(s.timing.xgap) + ',' + opt(s.timing.xgapmax) + '\n';
  }
  return out;
}

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json json_ms(std::optional<double> v) { return v ? ordered_json(round6(*v)) : ordered_json(nullptr); }

// One mode's (new or reuse) figures in summary.json.
ordered_json mode_json(const mode_result& m, bool baseline) {
  using json = ordered_json;
  json j;
  const auto& l = m.latency;
  j["n"] = l ? l->n : 0;
  j["attempted"] = m.attempted;
  j["failed"] = m.failed;
  j["median_ms"] = json_ms(l ? std::optional(l->median) : std::nullopt);
  j["median_ci_low_ms"] = json_ms(l && l->median_ci ? std::optional(l->median_ci->low) : std::nullopt);
  j["median_ci_high_ms"] = json_ms(l && l->median_ci ? std::optional(l->median_ci->high) : std::nullopt);
  j["p95_ms"] = json_ms(l ? std::optional(l->p95) : std::nullopt);
  j["min_ms"] = json_ms(l ? std::optional(l->min) : std::nullopt);
  j["max_ms"] = json_ms(l ? std::optional(l->max) : std::nullopt);
  if (baseline) {
    j["paired_delta_median_ms"] = 0.0;
    j["paired_n"] = l ? l->n : 0;
    j["paired_delta_ci_low_ms"] = 0.0;
    j["paired_delta_ci_high_ms"] = 0.0;
  } else {
    j["paired_delta_median_ms"] = json_ms(m.paired_delta_median);
    j["paired_n"] = m.paired_deltas.size();
    j["paired_delta_ci_low_ms"] = json_ms(m.paired_delta_ci ? std::optional(m.paired_delta_ci->low) : std::nullopt);
    j["paired_delta_ci_high_ms"] = json_ms(m.paired_delta_ci ? std::optional(m.paired_delta_ci->high) : std::nullopt);
  }
  if (m.inner_tls_median) {
    j["inner_tls_median_ms"] = json_ms(m.inner_tls_median);
    j["inner_tls_p95_ms"] = json_ms(m.inner_tls_p95);
  }
  if (m.mbps)
    j["throughput_mbps"] = {
        {"n", m.mbps->n}, {"median", round6(m.mbps->median)}, {"p5", round6(m.mbps->p5)}, {"p95", round6(m.mbps->p95)}};
  j["errors"] = json::object();
  for (const auto& [why, n] : m.errors) j["errors"][why] = n;
  return j;
}

// summary.json's "run": what was measured, how, and how it ended.
ordered_json run_json(const run_metadata& meta, const std::vector<path_result>& results) {
  using json = ordered_json;
  json run;
  run["id"] = meta.run_id;
  run["seed"] = meta.seed;
  run["time_utc"] = meta.time_utc;
  run["host"] = meta.host;
  run["command_line"] = redact_links(meta.command_line);
  run["target"] = meta.target;
  if (meta.bulk_bytes > 0) run["bulk_bytes"] = meta.bulk_bytes;
  run["versions"] = {{"vlessbench", meta.version}, {"tls", meta.tls_library}, {"asio", meta.asio_version}};
  run["counts"] = {{"new", meta.new_count}, {"reuse", meta.reuse_count}, {"warmup", meta.warmup}};
  run["timeout_ms"] = meta.timeout_ms;
  run["pause_ms"] = meta.pause_ms;
  run["vless_defaults"] = {{"nodelay", meta.vless_defaults.nodelay},
                           {"writes", std::string(to_string(meta.vless_defaults.writes))}};
  run["duration_s"] = round6(meta.duration_s);
  run["aborted"] = meta.aborted.empty() ? json(nullptr) : json(meta.aborted);
  run["interrupted"] = meta.interrupted.empty() ? json(nullptr) : json(meta.interrupted);
  std::size_t recorded = 0;
  for (const auto& r : results) recorded += r.fresh.attempted + r.reuse.attempted;
  run["samples"] = recorded;  // rows in samples.csv: fewer than the counts ask when stopped early
  return run;
}

// A family's fit: k (round trips per new request) and fixed (ms), with their 95% intervals.
ordered_json round_trips_json(const round_trip_fit& f) {
  ordered_json j;
  j["family"] = f.family;
  j["paths"] = f.paths;
  if (f.fit) {
    j["n"] = f.fit->n;
    j["k"] = round6(f.fit->slope);
    j["k_ci"] = {round6(f.fit->slope_ci.low), round6(f.fit->slope_ci.high)};
    j["fixed_ms"] = round6(f.fit->intercept);
    j["fixed_ci_ms"] = {round6(f.fit->intercept_ci.low), round6(f.fit->intercept_ci.high)};
    j["r2"] = round6(f.fit->r2);
  }
  j["text"] = f.text;
  return j;
}

}  // namespace

std::string summary_json(const run_metadata& meta, const std::vector<path_result>& results) {
  using json = nlohmann::ordered_json;
  json root;
  root["run"] = run_json(meta, results);
  std::size_t mismatches = 0;
  json paths = json::object();
  for (const auto& r : results) {
    json p;
    p["spec"] = redact_links(r.spec);
    p["kind"] = std::string(to_string(r.kind));
    p["baseline"] = r.baseline;
    if (r.kind == path_kind::vless)
      p["client"] = {{"nodelay", r.client.nodelay}, {"writes", std::string(to_string(r.client.writes))}};
    p["new"] = mode_json(r.fresh, r.baseline);
    p["reuse"] = mode_json(r.reuse, r.baseline);
    p["route_mismatches"] = r.route_mismatches;
    if (r.shared_h2_fresh + r.shared_h2_reuse > 0)
      p["shared_h2"] = {{"new", r.shared_h2_fresh}, {"reuse", r.shared_h2_reuse}};
    p["routes"] = json::object();
    for (const auto& [route, n] : r.routes) p["routes"][route] = n;
    if (!r.server_acks.empty() || !r.server_generations.empty()) {
      p["server"] = {{"ack", json::object()}, {"generation", json::object()}};
      for (const auto& [ack, n] : r.server_acks) p["server"]["ack"][ack] = n;
      for (const auto& [gen, n] : r.server_generations) p["server"]["generation"][std::to_string(gen)] = n;
    }
    p["stall"] = {{"verdict", std::string(to_string(r.stall.verdict))},
                  {"with_timing", r.stall.with_timing},
                  {"stalled", r.stall.stalled},
                  {"share", round6(r.stall.share)},
                  {"threshold_ms", stall_threshold_ms},
                  {"phases_of", r.stall.phases_of_stalled ? "stalled" : "all"},
                  {"tls_ms", json_ms(r.stall.tls_ms)},
                  {"vless_ms", json_ms(r.stall.vless_ms)},
                  {"upstream_ms", json_ms(r.stall.upstream_ms)},
                  {"max_vless_ms", json_ms(r.stall.max_vless_ms)},
                  {"terminated_in_between", r.stall.terminated_in_between},
                  {"foreign_phases", r.stall.foreign_phases},
                  {"shared_session_samples", r.stall.shared_session_samples},
                  {"rtts_subtracted", r.stall.rtts_subtracted},
                  {"rtt_subtracted_ms", json_ms(r.stall.rtt_subtracted_ms)},
                  {"post_spacing",
                   {{"samples", r.stall.spaced},
                    {"header_waits", r.stall.spacing_waits},
                    {"median_gap_ms", json_ms(r.stall.post_gap_ms)},
                    {"max_gap_ms", json_ms(r.stall.post_gap_max_ms)}}},
                  {"text", r.stall.text}};
    p["rtt_ms"] = json_ms(r.rtt_ms);
    if (r.round_trips) p["round_trips"] = round_trips_json(*r.round_trips);
    mismatches += r.route_mismatches;
    paths[r.name] = p;
  }
  root["route_mismatches"] = mismatches;
  root["paths"] = paths;
  return root.dump(2) + "\n";
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::vector<failing_path> failing_paths(const std::vector<path_result>& results, double max_failed_share) {
  std::vector<failing_path> out;
  // The direct path's own failure tells a VLESS path's "closed after the header" apart: the
  // target down (the daemon's connect_failed) rather than a refused session.
  std::string direct_error;
  for (const auto& r : results)
    if (r.kind == path_kind::direct && r.fresh.attempted + r.reuse.attempted > 0 &&
        r.fresh.failed + r.reuse.failed == r.fresh.attempted + r.reuse.attempted)
      direct_error = r.last_error;
  for (const auto& r : results) {
    const std::size_t attempted = r.fresh.attempted + r.reuse.attempted;
    const std::size_t failed = r.fresh.failed + r.reuse.failed;
    if (attempted == 0 || failed == 0) continue;
    const bool none_ok = failed == attempted;
    if (!none_ok && static_cast<double>(failed) <= max_failed_share * static_cast<double>(attempted)) continue;
    out.push_back({r.name, attempted, failed, r.last_error, failure_hint(r.kind, r.last_error, direct_error)});
  }
  return out;
}

bool closed_after_header(std::string_view error) {
  std::string e(error);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e.find("closed by peer") != std::string::npos || e.find("end of stream") != std::string::npos ||
         e.find("reset by peer") != std::string::npos;
}

std::string failure_hint(path_kind kind, std::string_view error, std::string_view direct_error) {
  std::string e(error);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto has = [&](std::string_view what) { return e.find(what) != std::string::npos; };
  if (has("certificate_verify_failed") || has("certificate verify failed"))
    return "the server's certificate is not trusted: add allowInsecure=1 to the link for the daemon's "
           "self-signed certificate, or give the daemon a certificate the client trusts for the link's sni "
           "(docs/configuration.md, [tls])";
  if (has("connection refused")) {
    switch (kind) {
      case path_kind::http_connect:
      case path_kind::socks5:
        return "nothing listens there: the proxy entry (the client's HTTP or SOCKS5 inbound) is not running, "
               "or listens on another port";
      case path_kind::vless: return "nothing listens there: the daemon's listener is not running at that host:port";
      default: return "nothing listens there: is the target (the daemon) running at that address?";
    }
  }
  if (kind == path_kind::vless && closed_after_header(error)) {
    if (!direct_error.empty())
      return "the direct path failed too (" + std::string(direct_error) +
             "): the target is down or unreachable, so the daemon could not connect to it either (its access log: "
             "vless.reject reason connect_failed); check --target";
    return "the daemon ended each session right after its VLESS header, as it does for a session it refuses: its "
           "access log's vless.reject says why (reason unknown_user: the link's UUID is not one of its users, "
           "compare it with `vlessbenchd links`; connect_failed: it cannot reach the target)";
  }
  if (has("timeout"))
    return "no answer within --timeout: a firewall dropping packets, a listener that accepts but never "
           "answers, or a slow network (raise --timeout)";
  if (has("status 4") || has("status 5")) return "the target answered with an error status: check --target's path";
  return {};
}

std::string format_failing_paths(const std::vector<failing_path>& failing, double max_failed_share) {
  std::string out;
  for (const auto& f : failing) {
    out += "vlessbench: path " + f.name + ": " + std::to_string(f.failed) + "/" + std::to_string(f.attempted) +
           " samples failed" +
           (f.failed == f.attempted
                ? " (no successful sample)"
                : " (more than " + std::to_string(std::lround(max_failed_share * 100)) + "%, --max-failed)") +
           "; last error: " + f.last_error + "\n";
    if (!f.hint.empty()) out += "  hint: " + f.hint + "\n";
  }
  return out;
}

std::string redact_links(std::string_view text) {
  std::string out;
  constexpr std::string_view scheme = "vless://";
  std::size_t from = 0;
  for (;;) {
    const auto at = text.find(scheme, from);
    if (at == std::string_view::npos) break;
    const auto user = at + scheme.size();
    const auto end = text.find_first_of("@/?# '\"", user);
    out.append(text.substr(from, user - from));
    if (end != std::string_view::npos && text[end] == '@' && end > user) {
      out += "REDACTED";
      from = end;
    } else {
      from = user;
    }
  }
  out.append(text.substr(from));
  return out;
}

std::string format_markdown(const run_metadata& meta, const std::vector<path_result>& results) {
  std::string t = "vlessbench run `" + meta.run_id + "`, target `" + meta.target + "`, " + meta.time_utc + ", " +
                  std::to_string(meta.new_count) + " new" + " + " + std::to_string(meta.reuse_count) +
                  " reused per path after " + plural(static_cast<std::size_t>(meta.warmup), "warm-up", "warm-ups") +
                  (meta.interrupted.empty() ? "" : " (interrupted by " + meta.interrupted + ")") + "\n\n";
  t += "| path | mode | n | fail | median ms | median 95% CI | p95 ms | paired Δ ms | paired Δ 95% CI |\n";
  t += "|:---|:---|---:|---:|---:|:---:|---:|---:|:---:|\n";
  const auto cell = [](std::string s) {
    std::string o;
    for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
    return o;
  };
  for (const auto& r : results)
    for (int mode = 0; mode < 2; ++mode) {
      const auto& m = mode == 0 ? r.fresh : r.reuse;
      if (m.attempted == 0) continue;
      const auto& l = m.latency;
      t += "| " + cell(r.name) + " | " + (mode == 0 ? "new" : "reuse") + " | " + std::to_string(l ? l->n : 0) + " | " +
           std::to_string(m.failed) + " | " + fmt_ms(l ? std::optional(l->median) : std::nullopt) + " | " +
           fmt_ci(l ? l->median_ci : std::nullopt) + " | " + fmt_ms(l ? std::optional(l->p95) : std::nullopt) + " | " +
           (r.baseline ? "baseline" : fmt_ms(m.paired_delta_median, true)) + " | " +
           (r.baseline ? "" : fmt_ci(m.paired_delta_ci, true)) + " |\n";
    }
  t += "\npaired Δ: median over rounds of (this path − the baseline in the same round).\n";
  return t;
}

}  // namespace vlessbench::runner
