#include "server/admin_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/log/access_log.hpp"
#include "core/net/watchdog.hpp"
#include "server/admin_server.hpp"

namespace vlessbench::admin {
namespace {

// A scan that finds nothing for this long sends an empty line (readers skip it), so a reader's
// idle timeout measures the daemon's progress, not how rare the run's lines are.
constexpr auto keepalive_every = std::chrono::seconds(2);
constexpr std::size_t read_step = 64 * 1024;
constexpr std::size_t max_line = log_line_cap;  // longer "lines" are skipped, not selected

struct file_handle {
  int fd = -1;
  ~file_handle() {
    if (fd >= 0) ::close(fd);
  }
};

// The file's bytes as they are read, cut into lines: those the query selects go to out (an
// over-long line is skipped whole) until the answer would pass its cap.
struct line_filter {
  const log_query& q;
  std::size_t cap;
  std::string carry, out;
  std::uint64_t lines = 0, selected = 0, sent = 0;
  bool skipping = false;  // inside an over-long line
  std::string why_cut;

  void take(std::string_view data) {
    while (!data.empty()) {
      const auto nl = data.find('\n');
      if (nl == std::string_view::npos) {
        if (!skipping && carry.size() + data.size() <= max_line) {
          carry.append(data);
        } else {
          skipping = true;
          carry.clear();
        }
        break;
      }
      if (!skipping && carry.size() + nl <= max_line) {
        carry.append(data.substr(0, nl));
        ++lines;
        if (log_line_selected(q, carry)) {
          if (sent + out.size() + carry.size() + 1 > cap) {
            why_cut = "the answer reached its cap of " + std::to_string(cap) + " bytes";
            return;
          }
          ++selected;
          out += carry;
          out += '\n';
        }
      }
      carry.clear();
      skipping = false;
      data.remove_prefix(nl + 1);
    }
  }
};

}  // namespace

std::optional<std::string> log_unreadable(const std::string& access_target) {
  if (access_target != "stdout") return std::nullopt;
  return "the access log goes to the daemon's stdout, which it cannot read back: set [log] access = FILE "
         "(the package's config has /var/log/vlessbench/access.jsonl), or copy the log and use "
         "`vlessbench verify DIR --log FILE`\n";
}

awaitable<void> stream_log(tcp::socket& socket, const std::string& file, const log_query& q, bool head_only,
                           std::size_t cap, std::chrono::milliseconds write_timeout) {
  file_handle f;
  f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  const int open_errno = errno;
  off_t end = 0;
  if (f.fd >= 0) end = ::lseek(f.fd, 0, SEEK_END);
  if (f.fd >= 0 && end >= 0) (void)::lseek(f.fd, 0, SEEK_SET);
  // The watchdog runs while a write waits on the reader, never while the scan reads the file:
  // it measures the client taking what was sent, however long the scan between two writes.
  watchdog_deadline deadline;
  deadline = steady_clock::time_point::max();
  auto last_sent = steady_clock::now();
  auto send = [&](const std::string& bytes) -> awaitable<bool> {
    deadline = steady_clock::now() + write_timeout;
    auto [ec, n] = co_await asio::async_write(socket, asio::buffer(bytes), as_tuple_awaitable);
    (void)n;
    deadline = steady_clock::time_point::max();
    last_sent = steady_clock::now();
    co_return !ec;
  };
  auto work = [&]() -> awaitable<void> {
    if (f.fd < 0 || end < 0) {
      const std::string body =
          "cannot read the access log " + file + ": " + std::strerror(f.fd < 0 ? open_errno : errno) + "\n";
      co_await send(response_head(503, "text/plain", body.size()) + (head_only ? std::string() : body));
      co_return;
    }
    if (!co_await send(response_head(200, "application/x-ndjson", std::nullopt)) || head_only) co_return;
    line_filter lf{q, cap};
    std::array<char, read_step> chunk{};
    std::uint64_t scanned = 0;
    const auto size = static_cast<std::uint64_t>(end);
    while (scanned < size && lf.why_cut.empty()) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), size - scanned));
      const auto got = ::read(f.fd, chunk.data(), want);
      if (got <= 0) {
        lf.why_cut = got < 0 ? std::string("read failed: ") + std::strerror(errno) : "the file shrank while read";
        break;
      }
      scanned += static_cast<std::uint64_t>(got);
      lf.take(std::string_view(chunk.data(), static_cast<std::size_t>(got)));
      if (lf.out.empty() && steady_clock::now() - last_sent >= keepalive_every) lf.out = "\n";
      if (!lf.out.empty()) {
        if (!co_await send(lf.out)) co_return;
        lf.sent += lf.out.size();
        lf.out.clear();
      }
      // One step of the scan at a time: sessions and probes waiting on this thread go first.
      co_await asio::post(co_await asio::this_coro::executor, use_awaitable);
    }
    json_line endl("log.end");
    endl.add("file", file).add("scanned_bytes", scanned).add("lines", lf.lines).add("selected", lf.selected);
    endl.add("complete", lf.why_cut.empty());
    if (!lf.why_cut.empty()) endl.add("reason", lf.why_cut);
    co_await send(endl.finish());
  };
  co_await (work() || watchdog(deadline, [&] {
              std::error_code ignored;
              socket.close(ignored);
            }));
}

}  // namespace vlessbench::admin
