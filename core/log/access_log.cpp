#include "core/log/access_log.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace vlessbench {

void append_json_string(std::string& out, std::string_view s, std::size_t max_len) {
  if (s.size() > max_len) s = s.substr(0, max_len);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        // Control bytes and everything non-ASCII are escaped: the log must stay valid UTF-8
        // whatever bytes a hostile client sends.
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1'000'000));
  return buf;
}

json_line::json_line(std::string_view event) {
  out_.reserve(512);
  out_ = "{";
  add("event", event);
  add("ts", utc_timestamp());
}

void json_line::key(std::string_view k) {
  if (!first_) out_ += ',';
  first_ = false;
  append_json_string(out_, k);
  out_ += ':';
}

json_line& json_line::add(std::string_view k, std::string_view value) {
  key(k);
  append_json_string(out_, value, max_field);
  return *this;
}

json_line& json_line::add(std::string_view k, std::int64_t value) {
  key(k);
  out_ += std::to_string(value);
  return *this;
}

json_line& json_line::add(std::string_view k, std::uint64_t value) {
  key(k);
  out_ += std::to_string(value);
  return *this;
}

json_line& json_line::add(std::string_view k, double value) {
  key(k);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  out_ += buf;
  return *this;
}

json_line& json_line::add(std::string_view k, bool value) {
  key(k);
  out_ += value ? "true" : "false";
  return *this;
}

json_line& json_line::begin_object(std::string_view k) {
  key(k);
  out_ += '{';
  first_ = true;
  return *this;
}

json_line& json_line::end_object() {
  out_ += '}';
  first_ = false;
  return *this;
}

json_line& json_line::begin_array(std::string_view k) {
  key(k);
  out_ += '[';
  first_ = true;
  return *this;
}

json_line& json_line::begin_element() {
  if (!first_) out_ += ',';
  out_ += '{';
  first_ = true;
  return *this;
}

json_line& json_line::end_array() {
  out_ += ']';
  first_ = false;
  return *this;
}

json_line& json_line::add_names(std::string_view key, std::string_view comma_separated) {
  this->key(key);
  std::string_view names = comma_separated;
  out_ += '[';
  bool first = true;
  while (!names.empty()) {
    const auto comma = names.find(',');
    if (!first) out_ += ',';
    first = false;
    append_json_string(out_, names.substr(0, comma), max_field);
    names = comma == std::string_view::npos ? std::string_view{} : names.substr(comma + 1);
  }
  out_ += ']';
  return *this;
}

const std::string& json_line::finish() {
  out_ += "}\n";
  return out_;
}

access_log::access_log(std::size_t queue_bytes) : queue_limit_(queue_bytes), sink_(open_target("stdout")) {
  writer_ = std::thread([this] { writer_loop(); });
  pthread_setname_np(writer_.native_handle(), "access-log");  // not a session thread in /proc
}

access_log::~access_log() {
  shutdown(std::chrono::seconds(1));
  close_sink(sink_);
}

access_log::sink access_log::open_target(const std::string& target) {
  struct stat st {};
  if (target == "stdout") {
    if (::fstat(1, &st) == 0) {
      if (S_ISREG(st.st_mode)) return {1, sink_kind::file};
      if (S_ISSOCK(st.st_mode)) return {1, sink_kind::socket};
    }
    // A pipe or a terminal: O_NONBLOCK on a description of our own, so that whoever shares
    // stdout's description (the shell, the other end's writers) keeps blocking writes.
    const int fd = ::open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) return {fd, sink_kind::nonblocking};
    return {1, sink_kind::blocking};
  }
  const int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0640);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "access log " + target);
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return {fd, sink_kind::file};
  return {fd, sink_kind::nonblocking};
}

void access_log::close_sink(const sink& s) {
  if (s.fd > 2) ::close(s.fd);
}

long access_log::try_write(const sink& s, const char* p, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = s.kind == sink_kind::socket ? ::send(s.fd, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                                  : ::write(s.fd, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -1;  // a full disk or a reader gone must not stop the daemon
    }
    done += static_cast<std::size_t>(r);
    if (s.kind != sink_kind::file) break;  // a partial write: the reader is full, the rest waits
  }
  return static_cast<long>(done);
}

void access_log::push_locked(item it) {
  queued_bytes_ += it.line.size();
  queue_.push_back(std::move(it));
  wake_writer_.notify_one();
}

void access_log::enqueue_dropped_event_locked() {
  json_line line("log.dropped");
  line.add("lines", pending_dropped_lines_).add("bytes", pending_dropped_bytes_).add("total_lines", dropped_lines_);
  line.add("reason", "queue");
  pending_dropped_lines_ = pending_dropped_bytes_ = 0;
  push_locked({line.finish()});
}

void access_log::enqueue_rate_dropped_event_locked(rate_bucket& b) {
  json_line line("log.dropped");
  line.add("lines", b.pending_lines).add("bytes", b.pending_bytes).add("total_lines", dropped_lines_);
  line.add("reason", b.reason).add(b.key, b.per_second);
  b.pending_lines = b.pending_bytes = 0;
  b.last_report = std::chrono::steady_clock::now();
  const std::string text = line.finish();
  // Through the usual path (written at once or queued), never itself rate-limited.
  if (queue_.empty() && !writer_busy_ && pending_dropped_lines_ == 0 && sink_.kind != sink_kind::blocking) {
    const long n = try_write(sink_, text.data(), text.size());
    if (n < 0 || static_cast<std::size_t>(n) == text.size()) return;
    if (n > 0) {
      push_locked({text.substr(static_cast<std::size_t>(n))});
      return;
    }
  }
  if (queued_bytes_ + text.size() <= queue_limit_) push_locked({text});
}

bool access_log::admit_rate_locked(rate_bucket& b, std::size_t bytes) {
  if (b.per_second == 0 || stop_) return true;
  const auto now = std::chrono::steady_clock::now();
  const double burst = static_cast<double>(b.per_second);
  const double elapsed = std::chrono::duration<double>(now - b.refill).count();
  b.refill = now;
  b.tokens = std::min(burst, b.tokens + elapsed * burst);
  if (b.pending_lines > 0 && now - b.last_report >= std::chrono::seconds(1))
    enqueue_rate_dropped_event_locked(b);  // at most one report a second while the flood lasts
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return true;
  }
  ++dropped_lines_;
  dropped_bytes_ += bytes;
  ++b.dropped_lines;
  if (b.pending_lines == 0 && now - b.last_report >= std::chrono::seconds(1))
    b.last_report = now;  // the first report of a flood comes a second after it began
  ++b.pending_lines;
  b.pending_bytes += bytes;
  return false;
}

// Every class's report that is due (or, now_or_never, every pending one: the flood's last).
void access_log::report_due_rates_locked(bool now_or_never) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& b : rate_)
    if (b.pending_lines > 0 && (now_or_never || now - b.last_report >= std::chrono::seconds(1)))
      enqueue_rate_dropped_event_locked(b);
}

void access_log::set_rate(rate_bucket& b, std::uint64_t lines) {
  if (lines != b.per_second) {
    b.per_second = lines;
    b.tokens = static_cast<double>(lines);
    b.refill = std::chrono::steady_clock::now();
  }
}

void access_log::set_max_lines_per_second(std::uint64_t lines) {
  const std::lock_guard lock(mutex_);
  set_rate(rate_[0], lines);
}

void access_log::set_max_session_lines_per_second(std::uint64_t lines) {
  const std::lock_guard lock(mutex_);
  set_rate(rate_[1], lines);
}

void access_log::open(const std::string& target) {
  const sink next = open_target(target);  // outside the lock: open(2) on a slow file system
  const std::lock_guard lock(mutex_);
  target_ = target;
  if (queue_.empty() && !writer_busy_) {
    close_sink(sink_);
    sink_ = next;
  } else if (!queue_.empty() && queue_.back().reopen) {
    close_sink(queue_.back().next);  // reopened twice behind a stalled reader: the last one wins
    queue_.back().next = next;
  } else {
    push_locked({{}, true, next});  // lines queued so far still go to the old descriptor
  }
}

void access_log::write(const std::string& line, line_class c) {
  std::unique_lock lock(mutex_);
  auto& bucket = rate_[c == line_class::session ? 1 : 0];
  if (!admit_rate_locked(bucket, line.size())) {
    const auto now = std::chrono::steady_clock::now();
    if (now - bucket.last_warning < std::chrono::seconds(1)) return;
    bucket.last_warning = now;
    const auto total = bucket.dropped_lines;
    const auto limit = bucket.per_second;
    const auto key = bucket.key;
    lock.unlock();
    spdlog::warn("access log: more than {} {}lines a second: dropping lines ({} since start; [log] {})", limit,
                 c == line_class::session ? "VLESS session " : "", total, key);
    return;
  }
  const bool idle = queue_.empty() && !writer_busy_;
  if (idle && pending_dropped_lines_ == 0 && sink_.kind != sink_kind::blocking) {
    const long n = try_write(sink_, line.data(), line.size());
    if (n < 0 || static_cast<std::size_t>(n) == line.size()) return;
    if (n > 0) {
      // The rest of a line the reader took in part goes next, whatever the bound, or the
      // stream would hold half a line.
      if (stop_)
        ++dropped_lines_;  // at exit nobody is left to finish it
      else
        push_locked({line.substr(static_cast<std::size_t>(n))});
      return;
    }
  }
  if (stop_ || queued_bytes_ + line.size() > queue_limit_) {
    ++dropped_lines_;
    dropped_bytes_ += line.size();
    ++pending_dropped_lines_;
    pending_dropped_bytes_ += line.size();
    if (idle && !stop_) enqueue_dropped_event_locked();  // a line larger than the whole queue
    const auto now = std::chrono::steady_clock::now();
    if (now - last_warning_ < std::chrono::seconds(1)) return;
    last_warning_ = now;
    const auto since = dropped_lines_ - warned_dropped_lines_;
    warned_dropped_lines_ = dropped_lines_;
    const auto total = dropped_lines_;
    const auto limit = queue_limit_;
    const auto where = target_;
    lock.unlock();
    spdlog::warn(
        "access log: the reader of {} does not keep up: dropping lines ({} since the last warning, {} since start; "
        "queue {} bytes)",
        where, since, total, limit);
    return;
  }
  if (pending_dropped_lines_ > 0) enqueue_dropped_event_locked();
  push_locked({line});
}

void access_log::writer_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // A flood's report is due a second after the last one even if no other line comes.
    while (!stop_ && queue_.empty()) {
      report_due_rates_locked(false);
      if (!queue_.empty()) break;
      auto due = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      for (const auto& b : rate_)
        if (b.pending_lines > 0) due = std::min(due, b.last_report + std::chrono::seconds(1));
      wake_writer_.wait_until(lock, due);
    }
    if (queue_.empty()) return;  // stop_
    std::deque<item> batch;
    batch.swap(queue_);
    writer_busy_ = true;
    sink current = sink_;
    lock.unlock();
    for (auto& it : batch) {
      bool written = false;
      if (!it.reopen && !abandon_) written = write_waiting(current, it.line);
      lock.lock();
      if (it.reopen) {
        close_sink(sink_);
        sink_ = current = it.next;
      } else {
        queued_bytes_ -= it.line.size();
        if (!written) ++lost_at_exit_;
      }
      lock.unlock();
    }
    lock.lock();
    writer_busy_ = false;
    if (queue_.empty() && pending_dropped_lines_ > 0 && !abandon_) enqueue_dropped_event_locked();
    if (queue_.empty()) idle_.notify_all();
  }
}

bool access_log::write_waiting(const sink& s, const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    if (s.kind != sink_kind::blocking) {
      const long n = try_write(s, line.data() + done, line.size() - done);
      if (n < 0) return true;  // lost, like a caller's failed write
      done += static_cast<std::size_t>(n);
      if (done == line.size()) return true;
    }
    pollfd p{s.fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, 100);
    if (abandon_) return false;
    if (ready <= 0 || s.kind != sink_kind::blocking) continue;
    // A descriptor we could not make non-blocking: write(2) once poll says there is room.
    const ssize_t n = ::write(s.fd, line.data() + done, line.size() - done);
    if (n < 0 && errno != EINTR && errno != EAGAIN) return true;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  return true;
}

bool access_log::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!stop_) report_due_rates_locked(true);  // the flood's last report
  return idle_.wait_for(lock, timeout, [&] { return queue_.empty() && !writer_busy_ && pending_dropped_lines_ == 0; });
}

std::uint64_t access_log::shutdown(std::chrono::milliseconds timeout) {
  if (!writer_.joinable()) return 0;
  flush(timeout);
  {
    // Past the deadline nothing more is waited for, not even a line queued since the flush.
    const std::lock_guard lock(mutex_);
    stop_ = true;
    abandon_ = true;
    wake_writer_.notify_one();
  }
  writer_.join();
  const std::lock_guard lock(mutex_);
  for (auto& it : queue_) {  // abandoned: the writer returned at once
    if (it.reopen) {
      close_sink(sink_);
      sink_ = it.next;
    } else {
      ++lost_at_exit_;
      queued_bytes_ -= it.line.size();
    }
  }
  queue_.clear();
  return lost_at_exit_;
}

void access_log::set_queue_bytes(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  queue_limit_ = bytes;
}

access_log::stats access_log::counters() const {
  const std::lock_guard lock(mutex_);
  return {dropped_lines_, dropped_bytes_, queued_bytes_, rate_[0].dropped_lines, rate_[1].dropped_lines};
}

}  // namespace vlessbench
