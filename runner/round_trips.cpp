// Round trips per new request (runner/fit.hpp): each path's RTT, the families of paths that
// differ only in it, their fits, and the table's section that prints them.
#include <algorithm>
#include <cstdio>
#include <map>

#include "runner/number_format.hpp"
#include "runner/report.hpp"

namespace vlessbench::runner {

namespace {

std::string padded(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// What paths must share to be fitted together (everything but their distance): kind, the link's
// transport (early data or not), flow, mux, the client's writes, and the listener's ACK policy as
// the daemon said it. Empty: the runner measures no RTT on this kind of path.
std::string fit_family(const path_spec& p, const path_result& r) {
  std::string f;
  switch (p.kind) {
    case path_kind::http_connect:
    case path_kind::socks5:
    case path_kind::tun: return "";
    case path_kind::direct: f = "direct"; break;
    case path_kind::forward: f = "tcp"; break;
    case path_kind::tls: f = "tls-terminator"; break;
    case path_kind::vless: {
      if (!p.link) return "";  // a path without its link (tests): no transport to group by
      const auto& t = p.link->transport;
      f = "vless " + std::string(to_string(t.kind)) + (t.tls ? "" : " plain");
      if (t.upgrades()) f += t.max_early_data > 0 ? " early-data" : " no-early-data";
      if (!p.link->flow.empty()) f += " " + p.link->flow;
      if (p.mux) f += " mux";
      f += r.client.nodelay ? "" : " nodelay-off";
      f += r.client.writes == write_mode::split ? " split-writes" : "";
      break;
    }
  }
  if (p.bulk != bulk_direction::none) f += " bulk-" + std::string(to_string(p.bulk));
  if (!r.server_acks.empty()) {
    const auto most = std::max_element(r.server_acks.begin(), r.server_acks.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    f += " ack " + most->first;
  }
  return f;
}

}  // namespace

void fit_round_trip_families(const std::vector<path_spec>& paths, std::vector<path_result>& results,
                             const std::vector<std::vector<sample>>& fresh) {
  auto& out = results;
  std::map<std::string, std::vector<std::size_t>> families;
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<double> rtts;
    for (const auto& s : fresh[i])
      if (s.ok && s.rtt_ms) rtts.push_back(*s.rtt_ms);
    out[i].rtt_ms = stats::median(rtts);
    const std::string family = fit_family(paths[i], out[i]);
    if (out[i].rtt_ms && !family.empty()) families[family].push_back(i);
  }
  for (const auto& [family, members] : families) {
    std::vector<std::string> names;
    std::vector<rtt_point> points;
    std::vector<double> rtts;
    for (const auto i : members) {
      names.push_back(out[i].name);
      rtts.push_back(*out[i].rtt_ms);
      for (const auto& s : fresh[i])
        if (s.ok && s.rtt_ms) points.push_back({*s.rtt_ms, s.ms()});
    }
    const auto fit = fit_round_trips(family, names, points, rtts);
    for (const auto i : members) out[i].round_trips = fit;
  }
}

namespace {

// One line for every family without a fit: a run at one distance (loopback) says so once instead
// of once per path.
std::string no_fit_line(const std::vector<std::string>& unfitted, double spread_ms, bool any_fit) {
  char spread[64];
  std::snprintf(spread, sizeof spread, "RTT spread %.2f ms < %.2f ms", spread_ms, min_rtt_spread_ms);
  if (!any_fit && spread_ms < min_rtt_spread_ms)
    return std::string("no fit: every path is at one distance (") + spread +
           ", e.g. loopback); a fit needs paths of one client and transport at two or more round-trip times "
           "(listeners that differ only in emulate.delay_ms)";
  std::string names;
  for (const auto& f : unfitted) names += (names.empty() ? "" : ", ") + f;
  return "no fit for " + names +
         ": each at one round-trip time (one path, or paths less than 1 ms apart); add a listener of the same "
         "transport with emulate.delay_ms";
}

}  // namespace

std::string format_round_trips(const std::vector<path_result>& results, std::size_t name_w) {
  std::string lines;
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& r : results) {
    if (!r.rtt_ms) continue;
    lines += "  " + padded(r.name, name_w) + "  RTT " + fmt_ms(r.rtt_ms) + " ms\n";
    lo = first ? *r.rtt_ms : std::min(lo, *r.rtt_ms);
    hi = first ? *r.rtt_ms : std::max(hi, *r.rtt_ms);
    first = false;
  }
  if (lines.empty()) return "";
  std::vector<std::string> done, unfitted;
  for (const auto& r : results) {
    if (!r.round_trips || std::find(done.begin(), done.end(), r.round_trips->family) != done.end()) continue;
    done.push_back(r.round_trips->family);
    if (!r.round_trips->fit) {
      unfitted.push_back(r.round_trips->family);
      continue;
    }
    std::string names;
    for (const auto& n : r.round_trips->paths) names += (names.empty() ? "" : ", ") + n;
    lines += "  " + r.round_trips->family + " (" + names + "): " + r.round_trips->text + "\n";
  }
  if (!unfitted.empty()) lines += "  " + no_fit_line(unfitted, hi - lo, unfitted.size() < done.size()) + "\n";
  return "\nround trips per new request (new = fixed + k x RTT; RTT: TCP_INFO min_rtt of the runner's own "
         "connections):\n" +
         lines;
}

}  // namespace vlessbench::runner
