#include "runner/verify.hpp"

#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runner/report.hpp"
#include "runner/sample.hpp"
#include "runner/stats.hpp"

namespace vlessbench::runner {

namespace {

constexpr std::size_t max_listed = 20;

struct log_entry {
  std::string route;
  std::string path_label;
  std::optional<std::uint64_t> session;
  int status = 0;
  std::uint64_t bytes = 0;  // response body, or request body (bytes_in) when larger
  std::int64_t duration_us = 0;
};

std::optional<path_kind> kind_from_string(const std::string& s) {
  for (auto k : {path_kind::direct, path_kind::http_connect, path_kind::socks5, path_kind::vless, path_kind::forward,
                 path_kind::tun, path_kind::tls})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

route_kind route_from_string(std::string_view s) {
  if (s == "direct") return route_kind::direct;
  if (s == "vless") return route_kind::vless;
  return route_kind::unknown;
}

// seq is a header value, so the log may carry it as a string or, from other writers, a number.
std::optional<std::uint64_t> as_u64(const nlohmann::json& j) {
  try {
    if (j.is_number_unsigned() || j.is_number_integer()) return j.get<std::uint64_t>();
    if (j.is_string()) return std::stoull(j.get<std::string>());
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

namespace {

// One verification: the run's summary, then what the server logged, then the samples against it.
class verifier {
 public:
  verify_report run(const std::string& summary_json, const std::string& samples_csv, std::istream& access_log) {
    read_summary(summary_json);
    std::string line;
    while (std::getline(access_log, line)) read_log_line(line);
    read_samples(samples_csv);
    check_datagram_counts();
    for (auto& [path, views] : bulk_)
      rep_.bulk.push_back(
          {path, views.first.size(), stats::median(views.first).value_or(0), stats::median(views.second).value_or(0)});
    return std::move(rep_);
  }

 private:
  void read_summary(const std::string& summary_json) {
    const auto summary = nlohmann::json::parse(summary_json, nullptr, false);
    if (summary.is_discarded() || !summary.contains("run") || !summary["run"].contains("id"))
      throw std::runtime_error("summary.json is not a vlessbench run summary");
    rep_.run_id = summary["run"]["id"].get<std::string>();
    for (const auto& [name, p] : summary["paths"].items())
      if (auto k = kind_from_string(p.value("kind", ""))) kinds_[name] = *k;

    const std::string target_text = summary["run"].value("target", "");
    banner_run_ = target_text.rfind("banner://", 0) == 0;
    // ntp:// and stun:// samples go to [[udp_target]]s too: proven by their udp.packet lines.
    udp_run_ = target_text.rfind("udp://", 0) == 0 || target_text.rfind("ntp://", 0) == 0 ||
               target_text.rfind("stun://", 0) == 0;
    dns_run_ = target_text.rfind("dns://", 0) == 0;
    if (dns_run_) {
      std::string why;
      if (const auto t = parse_target_url(target_text, why)) dns_name_ = t->dns_name;
    }
    if (udp_run_ || dns_run_) rep_.datagram_event = udp_run_ ? "udp.packet" : "dns.query";
    rep_.banner_run = banner_run_;
  }

  void read_log_line(const std::string& line) {
    if (line.empty()) return;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      ++rep_.log_unparsed;
      return;
    }
    if (banner_run_ && j.value("event", "") == "banner.connection") return read_banner_line(j);
    if (!rep_.datagram_event.empty()) return read_datagram_line(j);
    read_request_line(j);
  }

  void read_banner_line(const nlohmann::json& j) {
    ++rep_.log_banners;
    if (j.contains("vless_session")) {
      if (const auto id = as_u64(j["vless_session"])) banner_sessions_[*id] = j.value("route", "");
    } else if (j.value("route", "") == "direct") {
      ++banner_direct_;
    }
  }

  void read_datagram_line(const nlohmann::json& j) {
    if (j.value("event", "") != rep_.datagram_event) return;
    if (dns_run_ && (j.value("name", "") != dns_name_ || j.value("transport", "") != "udp")) return;
    ++rep_.log_datagram_lines;
    std::uint64_t n = 1;
    if (udp_run_) n = j.contains("packets_in") ? as_u64(j["packets_in"]).value_or(0) : 0;
    if (j.contains("vless_session")) {
      if (const auto id = as_u64(j["vless_session"])) datagrams_by_session_[*id] += n;
    } else if (j.value("route", "") == "direct") {
      datagrams_direct_ += n;
      direct_by_peer_[j.value("peer", "")] += n;
    }
  }

  void read_request_line(const nlohmann::json& j) {
    if (j.value("event", "") != "http.request" || !j.contains("run") || !j["run"].is_string() ||
        j["run"].get<std::string>() != rep_.run_id)
      return;
    const auto seq = j.contains("seq") ? as_u64(j["seq"]) : std::nullopt;
    if (!seq) return;
    ++rep_.log_requests;
    log_entry e;
    e.route = j.value("route", "");
    e.path_label = j.value("path_label", "");
    if (j.contains("vless_session")) e.session = as_u64(j["vless_session"]);
    if (j.contains("status") && j["status"].is_number_integer()) e.status = j["status"].get<int>();
    for (const char* k : {"bytes", "bytes_in"})
      if (j.contains(k) && j[k].is_number_unsigned()) e.bytes = std::max(e.bytes, j[k].get<std::uint64_t>());
    if (j.contains("duration_us") && j["duration_us"].is_number_integer())
      e.duration_us = j["duration_us"].get<std::int64_t>();
    log_[*seq] = std::move(e);
  }

  void read_samples(const std::string& samples_csv) {
    std::istringstream csv(samples_csv);
    std::string line;
    std::getline(csv, line);
    const auto header = parse_csv_line(line);
    for (std::size_t i = 0; i < header.size(); ++i) col_[header[i]] = i;
    for (const char* needed : {"path", "seq", "ok", "route", "session", "status"})
      if (!col_.count(needed)) throw std::runtime_error(std::string("samples.csv lacks column ") + needed);
    while (std::getline(csv, line)) {
      if (line.empty()) continue;
      const auto cells = parse_csv_line(line);
      if (cells.size() < header.size()) throw std::runtime_error("samples.csv has a short row: " + line);
      ++rep_.samples;
      if (!rep_.datagram_event.empty())
        check_datagram_sample(cells);
      else if (banner_run_)
        check_banner_sample(cells);
      else
        check_request_sample(cells);
    }
  }

  std::string where(const std::vector<std::string>& cells) {
    return "seq " + std::to_string(std::stoull(cells[col_["seq"]])) + " (" + cells[col_["path"]] + ")";
  }

  void problem(std::string text) {
    if (rep_.problems.size() < max_listed) rep_.problems.push_back(std::move(text));
  }

  // A sample proven by a line the server wrote at its own pace (datagram and banner runs): counted
  // unseen when no such line exists, else matched, and a route mismatch when the route its reply
  // named is not what its path kind allows. `namer` says who named the route in the message.
  void settle(bool seen, bool ok, const std::string& where, const std::string& path, const std::string& route,
              const std::string& session, std::string_view logged, std::string_view namer) {
    if (!seen) {
      if (ok) {
        ++rep_.unseen_ok;
        problem(where + ": succeeded but the server logged no " + std::string(logged) + " for route " + route +
                (session.empty() ? "" : " session " + session));
      } else {
        ++rep_.unseen_failed;
      }
      return;
    }
    ++rep_.matched;
    const auto kind = kinds_.find(path);
    if (kind != kinds_.end() && is_route_mismatch(kind->second, route_from_string(route))) {
      ++rep_.route_mismatches;
      problem(where + ": " + std::string(to_string(kind->second)) + " path, but " + std::string(namer) +
              " named route " + route);
    }
  }

  // A datagram sample is proven by the session its reply named (the echo's trailer, the DNS
  // answer's route TXT record) and the server's record of that session's datagrams.
  void check_datagram_sample(const std::vector<std::string>& cells) {
    const bool ok = cells[col_["ok"]] == "1";
    const std::string& route = cells[col_["route"]];
    const std::string& session = cells[col_["session"]];
    bool seen = false;
    if (route == "vless" && !session.empty()) {
      const auto id = std::stoull(session);
      seen = datagrams_by_session_.count(id) > 0;
      if (seen && ok) ++ok_by_session_[id];
    } else if (route == "direct") {
      // A direct path's sample names its own UDP address: that flow's lines. Otherwise (a
      // proxy path that went direct: the target saw the proxy's socket) by count.
      const std::string flow = col_.count("flow") ? cells[col_["flow"]] : std::string();
      if (!flow.empty()) {
        seen = direct_by_peer_.count(flow) > 0;
        if (seen && ok) ++ok_by_peer_[flow];
      } else {
        seen = datagrams_direct_ > 0;
      }
      if (seen && ok) ++ok_direct_;
    }
    settle(seen, ok, where(cells), cells[col_["path"]], route, session, rep_.datagram_event, "the server");
  }

  // A banner sample is proven by the connection it named: the session's banner.connection line.
  void check_banner_sample(const std::vector<std::string>& cells) {
    const std::string& route = cells[col_["route"]];
    const std::string& session = cells[col_["session"]];
    bool seen = false;
    if (route == "vless" && !session.empty()) {
      const auto b = banner_sessions_.find(std::stoull(session));
      seen = b != banner_sessions_.end();
    } else if (route == "direct") {
      seen = banner_direct_ > 0;
    }
    settle(seen, cells[col_["ok"]] == "1", where(cells), cells[col_["path"]], route, session, "banner.connection",
           "the banner");
  }

  // An HTTP sample is proven by the http.request line with its seq, and must agree with it.
  void check_request_sample(const std::vector<std::string>& cells) {
    const std::string& path = cells[col_["path"]];
    const bool ok = cells[col_["ok"]] == "1";
    const std::string at = where(cells);
    const auto it = log_.find(std::stoull(cells[col_["seq"]]));
    if (it == log_.end()) {
      if (ok) {
        ++rep_.unseen_ok;
        problem(at + ": succeeded but the server never logged it");
      } else {
        ++rep_.unseen_failed;
      }
      return;
    }
    ++rep_.matched;
    const auto& e = it->second;
    const auto kind = kinds_.find(path);
    if (kind != kinds_.end() && is_route_mismatch(kind->second, route_from_string(e.route))) {
      ++rep_.route_mismatches;
      problem(at + ": " + std::string(to_string(kind->second)) + " path, but the server saw route " + e.route);
    }
    if (disagrees(cells, at, e)) ++rep_.disagreements;
    if (col_.count("bytes") && col_.count("mbps") && ok && !cells[col_["mbps"]].empty() && e.duration_us > 0) {
      auto& [client, server] = bulk_[path];
      client.push_back(std::stod(cells[col_["mbps"]]));
      server.push_back(static_cast<double>(e.bytes) / static_cast<double>(e.duration_us));
    }
  }

  // Whether the sample's own view (path label, route, session, status) differs from the log's.
  bool disagrees(const std::vector<std::string>& cells, const std::string& at, const log_entry& e) {
    bool disagrees = false;
    if (e.path_label != cells[col_["path"]]) {
      disagrees = true;
      problem(at + ": server logged path label '" + e.path_label + "'");
    }
    const std::string& sample_route = cells[col_["route"]];
    if (sample_route != "unknown" && sample_route != e.route) {
      disagrees = true;
      problem(at + ": response said route " + sample_route + ", log says " + e.route);
    }
    const std::string& session = cells[col_["session"]];
    if (!session.empty() && e.session && std::to_string(*e.session) != session) {
      disagrees = true;
      problem(at + ": response said session " + session + ", log says " + std::to_string(*e.session));
    }
    const std::string& status = cells[col_["status"]];
    if (!status.empty() && e.status != 0 && std::to_string(e.status) != status) {
      disagrees = true;
      problem(at + ": response status " + status + ", log says " + std::to_string(e.status));
    }
    return disagrees;
  }

  // More samples naming a session than the server counted datagrams on it: some were not its.
  void check_datagram_counts() {
    for (const auto& [id, n] : ok_by_session_) {
      if (n <= datagrams_by_session_[id]) continue;
      ++rep_.disagreements;
      problem("session " + std::to_string(id) + ": " + std::to_string(n) + " ok samples named it, the server logged " +
              std::to_string(datagrams_by_session_[id]) + " datagrams");
    }
    for (const auto& [peer, n] : ok_by_peer_) {
      if (n <= direct_by_peer_[peer]) continue;
      ++rep_.disagreements;
      problem("flow " + peer + ": " + std::to_string(n) + " ok samples came from it, the server logged " +
              std::to_string(direct_by_peer_[peer]) + " datagrams");
    }
    if (ok_direct_ > datagrams_direct_) {
      ++rep_.disagreements;
      problem(std::to_string(ok_direct_) + " ok samples arrived direct, the server logged " +
              std::to_string(datagrams_direct_) + " direct datagrams");
    }
  }

  verify_report rep_;
  std::map<std::string, path_kind> kinds_;
  bool banner_run_ = false;
  bool udp_run_ = false;
  bool dns_run_ = false;
  std::string dns_name_;
  // Datagrams the server logged, per VLESS session and for direct flows (udp.packet counts
  // packets_in of a flow; a dns.query line is one query).
  std::map<std::uint64_t, std::uint64_t> datagrams_by_session_;
  std::uint64_t datagrams_direct_ = 0;
  std::map<std::string, std::uint64_t> direct_by_peer_;  // direct datagrams per peer address
  std::map<std::uint64_t, log_entry> log_;
  std::map<std::uint64_t, std::string> banner_sessions_;  // session -> route, from banner.connection
  std::size_t banner_direct_ = 0;
  std::map<std::string, std::size_t> col_;                                           // samples.csv's columns
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> bulk_;  // client, server MB/s
  std::map<std::uint64_t, std::uint64_t> ok_by_session_;  // datagram runs: ok samples naming each session
  std::uint64_t ok_direct_ = 0;
  std::map<std::string, std::uint64_t> ok_by_peer_;  // direct-path samples with their flow
};

}  // namespace

verify_report verify_run(const std::string& summary_json, const std::string& samples_csv, std::istream& access_log) {
  return verifier{}.run(summary_json, samples_csv, access_log);
}

log_query run_log_query(const std::string& summary_json, std::chrono::seconds since_margin) {
  const auto summary = nlohmann::json::parse(summary_json, nullptr, false);
  if (summary.is_discarded() || !summary.contains("run") || !summary["run"].contains("id"))
    throw std::runtime_error("summary.json is not a vlessbench run summary");
  log_query q;
  q.run = summary["run"]["id"].get<std::string>();
  const std::string target = summary["run"].value("target", "");
  for (const auto& [scheme, event] :
       {std::pair{"banner://", "banner.connection"}, std::pair{"udp://", "udp.packet"},
        std::pair{"dns://", "dns.query"}, std::pair{"ntp://", "udp.packet"}, std::pair{"stun://", "udp.packet"}})
    if (target.rfind(scheme, 0) == 0) q.events.emplace_back(event);
  if (q.events.empty()) return q;
  std::tm tm{};
  const std::string started = summary["run"].value("time_utc", "");
  if (!strptime(started.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm))
    throw std::runtime_error("summary.json: run.time_utc '" + started + "' is not YYYY-MM-DDTHH:MM:SSZ");
  const std::time_t since = timegm(&tm) - since_margin.count();
  gmtime_r(&since, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  q.since = buf;
  return q;
}

std::string format_verify_report(const verify_report& r) {
  std::ostringstream o;
  o << "run " << r.run_id << ": " << r.samples << " samples, " << r.matched << " found in the access log";
  if (r.banner_run)
    o << " (by their banner.connection lines: a banner connection logs no request)";
  else if (r.datagram_event.empty())
    o << " (" << r.log_requests << " logged requests of this run, warm-ups included)";
  o << "\n";
  o << "  ok samples the server never saw: " << r.unseen_ok << "\n";
  o << "  failed samples the server never saw: " << r.unseen_failed << "\n";
  o << "  route mismatches (log route vs path kind): " << r.route_mismatches << "\n";
  o << "  disagreements (path label, route, session, status): " << r.disagreements << "\n";
  if (r.log_unparsed) o << "  access-log lines that are not JSON: " << r.log_unparsed << "\n";
  if (r.log_banners) o << "  banner.connection lines in the log: " << r.log_banners << "\n";
  if (!r.datagram_event.empty())
    o << "  " << r.datagram_event << " lines in the log: " << r.log_datagram_lines
      << (r.datagram_event == "udp.packet" ? " (a flow's line is written once it idles)\n" : "\n");
  if (!r.bulk.empty()) {
    o << "  throughput, median MB/s (client: request to last byte; server: its http.request duration_us):\n";
    for (const auto& b : r.bulk) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "    %-24s n %-4zu client %9.1f  server %9.1f\n", b.path.c_str(), b.n,
                    b.client_mbps, b.server_mbps);
      o << buf;
    }
  }
  for (const auto& p : r.problems) o << "  - " << p << "\n";
  if (r.samples > 0 && r.matched == 0 && r.unseen_ok > 0 && !r.daemon.empty())
    o << "  hint: not one sample of run " << r.run_id << " is in the log of " << r.daemon
      << ": the run may have gone to another daemon, or that log was rotated since (the daemon reads only "
      << "its current file)\n";
  else if (r.samples > 0 && r.matched == 0 && r.unseen_ok > 0)
    o << "  hint: not one sample of run " << r.run_id << " is in this log: it may be the wrong file (another "
      << "daemon's log, one rotated since, or the daemon's stderr instead of its access log)\n";
  o << (r.ok() ? "verify: OK\n" : "verify: FAILED\n");
  return o.str();
}

}  // namespace vlessbench::runner
