#pragma once
// `vlessbench verify`: every recorded sample of a run against the daemon's access log, matched
// by run id + seq. Pure: texts in, findings out.
#include <chrono>
#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "core/wire/log_query.hpp"

namespace vlessbench::runner {

struct verify_report {
  std::string run_id;
  std::size_t samples = 0;
  std::size_t matched = 0;
  std::size_t unseen_ok = 0;          // ok samples the server never logged: a problem
  std::size_t unseen_failed = 0;      // failed samples the server never saw: expected for some failures
  std::size_t route_mismatches = 0;   // the log's route contradicts the path's kind
  std::size_t disagreements = 0;      // log and sample disagree on path, route, session or status
  std::size_t log_requests = 0;       // http.request lines of this run
  std::size_t log_unparsed = 0;       // lines that are not JSON
  std::vector<std::string> problems;  // first few, human-readable
  std::string daemon;                 // set when the lines came from a daemon's GET /api/log: its URL and file
  // banner:// runs: banner.connection lines (matched by the session each banner named; direct
  // samples by count, as a direct banner connection carries no label).
  std::size_t log_banners = 0;
  bool banner_run = false;  // proven by banner.connection lines: the run logs no http.request
  // udp:// runs: udp.packet lines (one per flow, written when the flow goes idle: run verify
  // after [limits] udp_idle_timeout_ms); dns:// runs: dns.query lines for the run's name. Matched
  // by the VLESS session each reply named (its datagram count must cover the samples that named
  // it); direct samples by count, as a direct datagram carries no label.
  std::size_t log_datagram_lines = 0;
  std::string datagram_event;  // "udp.packet" or "dns.query" on such runs
  // Bulk runs, per path: median MB/s as the client measured it and as the server logged it
  // (http.request bytes or bytes_in over its duration_us).
  struct bulk_view {
    std::string path;
    std::size_t n = 0;
    double client_mbps = 0, server_mbps = 0;
  };
  std::vector<bulk_view> bulk;

  bool ok() const { return samples > 0 && unseen_ok == 0 && route_mismatches == 0 && disagreements == 0; }
};

// summary_json: the run's summary.json (run id and path kinds); samples_csv: its samples.csv.
// Throws std::runtime_error when the run files are unusable.
verify_report verify_run(const std::string& summary_json, const std::string& samples_csv, std::istream& access_log);
std::string format_verify_report(const verify_report& r);

// What to ask a daemon's GET /api/log for this run (summary_json: its summary.json): the run's
// lines by id; for banner, UDP and DNS runs also the label-less events those samples are proven
// by, written from since_margin before the run's start on (the margin covers a guest clock a
// little behind the runner's). Throws std::runtime_error as verify_run does.
log_query run_log_query(const std::string& summary_json, std::chrono::seconds since_margin = std::chrono::seconds(120));

}  // namespace vlessbench::runner
