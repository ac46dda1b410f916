#pragma once
// The JSON-lines access log (DESIGN.md §3): one object per event, one write(2) per line so lines
// from one process never interleave and nothing sits in a buffer when the process dies.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

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
  access_log() = default;
  ~access_log();
  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;
  // "stdout" or a file path (opened for append, created 0640). Throws std::system_error.
  // Thread-safe, as is write(); target() is for the thread that opens.
  void open(const std::string& target);
  const std::string& target() const { return target_; }
  void write(const std::string& line);

 private:
  std::mutex mutex_;
  int fd_ = 1;
  std::string target_ = "stdout";
};

}  // namespace vlessbench
