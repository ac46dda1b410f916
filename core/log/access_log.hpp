#pragma once
// The JSON-lines access log (DESIGN.md §3): one object per event, one write(2) per line so lines
// never interleave. A line is written by the caller at once while the reader keeps up, so nothing
// sits in a buffer then; when the reader stalls (a pipe nobody reads) lines wait in a queue bounded
// in bytes that a writer thread drains, so logging never blocks serving, and lines that do not
// fit are dropped, counted and reported (event log.dropped, docs/configuration.md).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace vlessbench {

// Builds one JSON object: {"event":"...","ts":"...", ...}\n. Strings are escaped; a value over
// max_field bytes is cut (hostile headers must not blow up the log).
class json_line {
 public:
  static constexpr std::size_t max_field = 256;
  explicit json_line(std::string_view event);
  json_line& add(std::string_view key, std::string_view value);
  json_line& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  json_line& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  json_line& add(std::string_view key, std::int64_t value);
  json_line& add(std::string_view key, std::uint64_t value);
  json_line& add(std::string_view key, int value) { return add(key, static_cast<std::int64_t>(value)); }
  json_line& add(std::string_view key, unsigned value) { return add(key, static_cast<std::uint64_t>(value)); }
  json_line& add(std::string_view key, double value);
  json_line& add(std::string_view key, bool value);
  // Opens a nested object; close it with end_object().
  json_line& begin_object(std::string_view key);
  json_line& end_object();
  // An array of objects: begin_array(key), then per element begin_element() ... end_object(),
  // then end_array().
  json_line& begin_array(std::string_view key);
  json_line& begin_element();
  json_line& end_array();
  // An array of strings from comma-separated names: add_names("k", "a,b") writes "k":["a","b"].
  json_line& add_names(std::string_view key, std::string_view comma_separated);
  const std::string& finish();  // closes the object and appends '\n'

 private:
  void key(std::string_view k);
  std::string out_;
  bool first_ = true;
};

void append_json_string(std::string& out, std::string_view s, std::size_t max_len = SIZE_MAX);
std::string utc_timestamp();  // 2026-11-30T04:55:01.123456Z

class access_log {
 public:
  static constexpr std::size_t default_queue_bytes = 4u << 20;
  explicit access_log(std::size_t queue_bytes = default_queue_bytes);
  // Flushes with a short deadline (flush() first for a longer one), then stops the writer.
  ~access_log();
  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;
  // "stdout" or a file path (opened for append, created 0640). Throws std::system_error; a FIFO
  // without a reader is an error (ENXIO) rather than a daemon blocked in open(2). Lines written
  // before the call go to the old target, later ones to the new. Thread-safe, as is write();
  // target() is for the thread that opens.
  void open(const std::string& target);
  const std::string& target() const { return target_; }
  // Whose line it is, for the rate bound: an authenticated VLESS session's own lines (its
  // vless.* lines and the targets' answers it relayed, route = vless) have a budget of their own,
  // so no flood of direct or unauthenticated traffic can drop the route proof of a run.
  enum class line_class { other, session };
  // Never blocks on the reader: writes at once, queues, or drops (counted) when the queue is full
  // or the class's rate is spent.
  void write(const std::string& line, line_class c = line_class::other);
  // Waits until the queue is empty: every queued line and the drop report written. False at the
  // deadline (the reader is stalled).
  bool flush(std::chrono::milliseconds timeout);
  // At exit: flush() with this deadline, then stop the writer thread, giving up on a stalled
  // reader (a line it was part way through stays cut). Returns the lines still queued, now lost.
  // Later lines are written only if the reader takes them at once, else dropped. The destructor
  // calls it with a one-second deadline if it was not called.
  std::uint64_t shutdown(std::chrono::milliseconds timeout);
  void set_queue_bytes(std::size_t bytes);
  // At most this many lines a second (a token bucket of one second's worth, for the whole
  // daemon); lines past it are dropped, counted, and reported at most once a second in a
  // log.dropped event with reason "rate". 0: no bound. Keeps one flooding client from filling
  // the disk (docs/configuration.md [log] max_lines_per_second).
  void set_max_lines_per_second(std::uint64_t lines);
  // The same for line_class::session, a bucket apart (docs/configuration.md [log]
  // max_session_lines_per_second; reported with reason "session_rate").
  void set_max_session_lines_per_second(std::uint64_t lines);

  struct stats {
    std::uint64_t dropped_lines = 0;  // since start
    std::uint64_t dropped_bytes = 0;
    std::size_t queued_bytes = 0;                  // waiting for the reader now
    std::uint64_t rate_dropped_lines = 0;          // of dropped_lines: over max_lines_per_second
    std::uint64_t session_rate_dropped_lines = 0;  // of dropped_lines: over max_session_lines_per_second
  };
  stats counters() const;

 private:
  // How a descriptor is written without blocking the caller (see open_target()).
  enum class sink_kind {
    file,         // a regular file: write(2) does not wait for a reader
    nonblocking,  // a description of our own with O_NONBLOCK (pipe, FIFO, terminal)
    socket,       // send(MSG_DONTWAIT): stdout as the journal's stream socket
    blocking,     // none of those: only the writer thread writes, after poll(2)
  };
  struct sink {
    int fd = 1;
    sink_kind kind = sink_kind::blocking;
  };
  // A line (or the unwritten rest of one), or a switch to another descriptor.
  struct item {
    std::string line;
    bool reopen = false;
    sink next{};
  };
  static sink open_target(const std::string& target);
  static void close_sink(const sink& s);
  // One attempt that does not wait for the reader: bytes written (a regular file takes all of
  // them), 0 when it would block, -1 on an error (the line is lost, as with a full disk).
  static long try_write(const sink& s, const char* p, std::size_t n);
  void push_locked(item it);
  void enqueue_dropped_event_locked();
  // One class's token bucket (a second's worth) and what it dropped.
  struct rate_bucket {
    std::string_view reason;       // of its log.dropped events: "rate", "session_rate"
    std::string_view key;          // its [log] key, named in those events
    std::uint64_t per_second = 0;  // 0: no rate bound
    double tokens = 0;
    std::chrono::steady_clock::time_point refill{};
    std::uint64_t dropped_lines = 0;                     // since start
    std::uint64_t pending_lines = 0, pending_bytes = 0;  // not reported yet
    std::chrono::steady_clock::time_point last_report{};
    std::chrono::steady_clock::time_point last_warning{};
  };
  void enqueue_rate_dropped_event_locked(rate_bucket& b);
  void report_due_rates_locked(bool now_or_never);
  static void set_rate(rate_bucket& b, std::uint64_t lines);
  // Takes a token for one line from its class's bucket; false when the line is over the rate
  // (counted).
  bool admit_rate_locked(rate_bucket& b, std::size_t bytes);
  void writer_loop();
  // The writer's write of one whole line, waiting for the reader in poll(2) steps so that
  // shutdown() can give up on it; false when given up.
  bool write_waiting(const sink& s, const std::string& line);

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_;  // items queued, or stop
  std::condition_variable idle_;         // the writer ran out of work
  std::deque<item> queue_;
  std::size_t queue_limit_;
  std::size_t queued_bytes_ = 0;  // lines in queue_ and the batch the writer holds
  bool writer_busy_ = false;      // the writer holds a batch: callers must queue behind it
  sink sink_{};                   // where the head of the stream goes
  std::uint64_t pending_dropped_lines_ = 0, pending_dropped_bytes_ = 0;  // not reported yet
  std::uint64_t dropped_lines_ = 0, dropped_bytes_ = 0;
  std::uint64_t warned_dropped_lines_ = 0;  // dropped_lines_ at the last warning
  rate_bucket rate_[2] = {{.reason = "rate", .key = "max_lines_per_second"},
                          {.reason = "session_rate", .key = "max_session_lines_per_second"}};
  std::chrono::steady_clock::time_point last_warning_{};
  std::uint64_t lost_at_exit_ = 0;
  bool stop_ = false;
  std::atomic<bool> abandon_{false};  // past the exit deadline: give up on a stalled reader
  std::string target_ = "stdout";
  std::thread writer_;
};

}  // namespace vlessbench
