#pragma once
// `vlessbench verify --daemon URL` (docs/runner.md, "Verify against a daemon in a VM"): the lines
// of one run fetched from the daemon's admin listener (GET /api/log, docs/dashboard.md) into a
// file in the run's folder, for verify_run to read like a copied access log.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "core/wire/log_query.hpp"

namespace vlessbench::runner {

struct fetched_log {
  std::uint64_t selected = 0;       // lines the daemon sent
  std::uint64_t scanned_bytes = 0;  // of its access log
  std::string file;                 // the daemon's access-log path
};

// daemon: http://HOST:PORT (the admin listener); token: its [admin] token or empty. Writes the
// selected lines to `out` as they arrive. Throws std::runtime_error with what went wrong and what
// to do: unreachable, 401 (no or wrong token), 409 (the log goes to stdout), an answer cut short
// (no log.end line), one the daemon cut at its cap, a line over log_line_cap. `idle` bounds every
// connect, write and read; `total` the whole fetch.
inline constexpr std::chrono::seconds default_fetch_timeout{300};
fetched_log fetch_run_log(const std::string& daemon, const std::string& token, const log_query& q,
                          const std::filesystem::path& out, std::chrono::milliseconds idle = std::chrono::seconds(10),
                          std::chrono::milliseconds total = default_fetch_timeout);

// verify_run for a run (its summary.json and samples.csv texts) against the lines fetched from
// the daemon (kept in `copy`, the run folder's daemon-log.jsonl). Lines a daemon writes later (a UDP flow's at its idle
// timeout, a banner connection's at close) may be missing at first: while the report is not OK and `wait` has not
// passed, fetches again every 2 s (at most 1 + wait/2 fetches, each within fetch_timeout). Progress
// notes go to `notes`.
struct verify_report;
verify_report verify_against_daemon(const std::string& summary, const std::string& samples,
                                    const std::filesystem::path& copy, const std::string& daemon,
                                    const std::string& token, std::chrono::seconds wait, std::ostream& notes,
                                    std::chrono::seconds fetch_timeout = default_fetch_timeout);

}  // namespace vlessbench::runner
