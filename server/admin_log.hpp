#pragma once
// GET /api/log?run=ID[&events=…&since=…] on the admin listener (docs/dashboard.md, "A run's log
// lines"): the access-log lines of one run, for `vlessbench verify --daemon` on a machine that
// cannot read the daemon's file. Streamed from the file as it is when the request arrives (the
// size at open bounds the scan, so a log that keeps growing ends too), in 64 KiB steps that yield
// to the daemon's other work between them; at most log_answer_cap bytes of selected lines; ended by a
// log.end line that says whether the answer is whole. The caller has checked Host and token.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/wire/log_query.hpp"

namespace vlessbench::admin {

inline constexpr std::size_t max_log_streams = 2;  // at once; more get 503

// access_target: the running config's [log] access ("stdout" or a path). The body of the 409
// that says why there is no file to read, or nothing.
std::optional<std::string> log_unreadable(const std::string& access_target);

// Writes the 200 head and the selected lines, then the log.end line (or a 503 naming the file
// and the error when it cannot be opened). Every write has write_timeout; a reader that stops
// reading is closed. The scan between writes has no deadline (the file's size at open bounds it);
// while it finds nothing, an empty line goes out every 2 s.
awaitable<void> stream_log(tcp::socket& socket, const std::string& file, const log_query& q, bool head_only,
                           std::size_t cap = log_answer_cap,
                           std::chrono::milliseconds write_timeout = std::chrono::seconds(5));

}  // namespace vlessbench::admin
