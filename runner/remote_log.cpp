#include "runner/remote_log.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/net/watchdog.hpp"
#include "core/wire/http_parser.hpp"
#include "runner/path_spec.hpp"
#include "runner/verify.hpp"

namespace vlessbench::runner {
namespace {

constexpr std::size_t max_error_body = 4096;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// --daemon as the admin listener's plain-HTTP address, --token as a header value; else a usage error.
target_url admin_url_of(const std::string& daemon, const std::string& token) {
  std::string reason;
  const auto url = parse_target_url(daemon, reason);
  if (url && url->scheme == target_scheme::https)
    throw std::runtime_error("--daemon: the runner fetches over plain HTTP only, not '" + daemon +
                             "': across an untrusted network forward the admin listener over SSH (ssh -L "
                             "9090:127.0.0.1:9090 VM) and pass --daemon http://127.0.0.1:9090 (docs/runner.md)");
  if (!url || url->scheme != target_scheme::http)
    throw std::runtime_error("--daemon: expected the admin listener as http://HOST:PORT, got '" + daemon + "'" +
                             (url ? "" : " (" + reason + ")"));
  for (const char c : token)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      throw std::runtime_error("--token: a token has no spaces or control characters");
  return *url;
}

// Whole lines go to the file as they come; a partial one waits for its rest. Empty lines are the
// daemon's keep-alives during a long scan. Returns the bytes written; last_line: the last whole
// non-empty line.
std::uint64_t write_whole_lines(std::string& buf, std::ofstream& file, std::string& last_line) {
  std::size_t start = 0;
  for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n', start)) {
    if (nl > start) last_line.assign(buf, start, nl - start);
    start = nl + 1;
  }
  file.write(buf.data(), static_cast<std::streamsize>(start));
  buf.erase(0, start);
  return start;
}

// The answer's status, then its log.end line: whether the lines in the file are all there are.
// Empty when they are (got then says what the daemon scanned); else why not.
std::string judge_answer(int status, const std::string& buf, const std::string& last_line, std::uint64_t body_bytes,
                         const std::string& where, bool no_token, fetched_log& got) {
  const std::string text = trimmed(buf.substr(0, max_error_body));
  if (status == 401) {
    return where + " refused " + (no_token ? "a request without a token" : "the token") +
           " (401): pass its [admin] token with --token TOKEN or VLESSBENCH_ADMIN_TOKEN (docs/dashboard.md)";
  }
  if (status == 404) {
    return where + " has no /api/log (404): a daemon older than this runner; copy its access log and use --log FILE";
  }
  if (status != 200) {
    return where + " answered " + std::to_string(status) + ": " + text;
  }
  const auto end = nlohmann::json::parse(last_line, nullptr, false);
  if (end.is_discarded() || !end.is_object() || end.value("event", "") != "log.end") {
    return where + " ended its answer without a log.end line: the answer is cut short (" + std::to_string(body_bytes) +
           " bytes read)";
  }
  if (!end.value("complete", false)) {
    return where + " cut its answer: " + end.value("reason", std::string("no reason given"));
  }
  got.selected = end.value("selected", std::uint64_t{0});
  got.scanned_bytes = end.value("scanned_bytes", std::uint64_t{0});
  got.file = end.value("file", std::string());
  return {};
}

}  // namespace

// size: one coroutine under one watchdog (connect, request, read), its steps sharing socket, deadline and buffer
fetched_log fetch_run_log(const std::string& daemon, const std::string& token, const log_query& q,
                          const std::filesystem::path& out, std::chrono::milliseconds idle,
                          std::chrono::milliseconds total) {
  const auto url = admin_url_of(daemon, token);
  const std::string where = "the daemon's admin listener at " + url.authority();
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + out.string());

  asio::io_context io;
  tcp::socket socket(io);
  watchdog_deadline deadline;
  bool timed_out = false;
  std::string error;  // set on failure: the exception's text
  fetched_log got;
  // Each step has `idle`, the whole answer `total`: a daemon that drips a byte now and then
  // never passes the one, always the other.
  const auto give_up = steady_clock::now() + total;
  auto next_deadline = [&] { return std::min(steady_clock::now() + idle, give_up); };
  auto work = [&]() -> awaitable<void> {
    deadline = next_deadline();
    tcp::resolver resolver(io);
    auto [rec, endpoints] = co_await resolver.async_resolve(url.host, std::to_string(url.port), as_tuple_awaitable);
    if (rec) {
      error = "cannot resolve " + url.host + ": " + rec.message();
      co_return;
    }
    auto [cec, ep] = co_await asio::async_connect(socket, endpoints, as_tuple_awaitable);
    (void)ep;
    if (cec) {
      error = "cannot reach " + where + ": " + cec.message() +
              " (is [admin] listen on an address this machine reaches? docs/dashboard.md)";
      co_return;
    }
    std::string request = "GET /api/log?" + format_log_query(q) + " HTTP/1.1\r\nHost: " + url.authority() +
                          "\r\nAccept: application/x-ndjson\r\nConnection: close\r\n";
    if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
    request += "\r\n";
    deadline = next_deadline();
    auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(request), as_tuple_awaitable);
    (void)wn;
    if (wec) {
      error = "sending the request to " + where + ": " + wec.message();
      co_return;
    }
    std::string buf;
    std::array<char, 64 * 1024> chunk{};
    parse_result<http::response> head;
    bool eof = false;
    std::uint64_t body_bytes = 0;
    std::string last_line;  // the last complete line: log.end when the answer is whole
    for (;;) {
      if (!head.complete()) {
        head = http::parse_response(buf);
        if (head.invalid()) {
          error = where + " answered something that is not HTTP (" + std::string(head.reason) + ")";
          co_return;
        }
        if (head.complete()) {
          buf.erase(0, head.consumed);
        } else if (buf.size() > http::max_head_bytes) {  // the head alone: lines may come in the same read
          error = where + " sent an answer head over " + std::to_string(http::max_head_bytes) + " bytes";
          co_return;
        }
      }
      if (head.complete() && head.value.status == 200) {
        body_bytes += write_whole_lines(buf, file, last_line);
        if (body_bytes > log_answer_cap + max_error_body) {
          error = where + " sent more than " + std::to_string(log_answer_cap) + " bytes: stopped reading";
          co_return;
        }
        if (buf.size() > log_line_cap) {
          error = where + " sent a line over " + std::to_string(log_line_cap) +
                  " bytes (the daemon never selects one): stopped reading";
          co_return;
        }
      } else if (head.complete() && buf.size() >= max_error_body) {
        break;  // an error's text: its start is enough
      }
      if (eof) break;
      deadline = next_deadline();
      auto [rec2, n] = co_await socket.async_read_some(asio::buffer(chunk), as_tuple_awaitable);
      if (rec2 == asio::error::eof) {
        eof = true;
        continue;
      }
      if (rec2) {
        error = "reading from " + where + ": " + rec2.message();
        co_return;
      }
      buf.append(chunk.data(), n);
    }
    if (!head.complete()) {
      error = where + " closed the connection before answering";
      co_return;
    }
    error = judge_answer(head.value.status, buf, last_line, body_bytes, where, token.empty(), got);
  };
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        co_await (work() || watchdog(deadline, [&] {
                    timed_out = true;
                    std::error_code ignored;
                    socket.close(ignored);
                  }));
      },
      [&](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  if (timed_out && steady_clock::now() >= give_up)
    throw std::runtime_error(where + ": no whole answer within " + std::to_string(total.count() / 1000) +
                             " s (--fetch-timeout): stopped reading");
  if (timed_out) throw std::runtime_error(where + ": no answer within " + std::to_string(idle.count()) + " ms");
  if (!error.empty()) throw std::runtime_error(error);
  file.close();
  if (!file) throw std::runtime_error("cannot write " + out.string());
  return got;
}

verify_report verify_against_daemon(const std::string& summary, const std::string& samples,
                                    const std::filesystem::path& copy, const std::string& daemon,
                                    const std::string& token, std::chrono::seconds wait, std::ostream& notes,
                                    std::chrono::seconds fetch_timeout) {
  const log_query q = run_log_query(summary);
  constexpr auto retry_every = std::chrono::seconds(2);
  const auto give_up = std::chrono::steady_clock::now() + wait;
  for (std::uint64_t attempt = 1;; ++attempt) {
    const auto got = fetch_run_log(daemon, token, q, copy, std::chrono::seconds(10), fetch_timeout);
    std::ifstream lines(copy);
    auto report = verify_run(summary, samples, lines);
    report.daemon = daemon + " (" + got.file + ")";
    notes << "verify: fetched " << got.selected << " line(s) of run " << q.run << " from " << daemon << " (" << got.file
          << ", " << got.scanned_bytes << " bytes scanned) into " << copy.string() << "\n";
    if (report.ok() || std::chrono::steady_clock::now() + retry_every > give_up) return report;
    notes << "verify: not every sample is in the daemon's log yet (attempt " << attempt << "); fetching again in 2 s\n";
    std::this_thread::sleep_for(retry_every);
  }
}

}  // namespace vlessbench::runner
