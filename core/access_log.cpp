#include "access_log.hpp"

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

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
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(us % 1'000'000));
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

const std::string& json_line::finish() {
  out_ += "}\n";
  return out_;
}

access_log::~access_log() {
  if (fd_ > 2) ::close(fd_);
}

void access_log::open(const std::string& target) {
  int fd = 1;
  if (target != "stdout") {
    fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) throw std::system_error(errno, std::system_category(), "access log " + target);
  }
  const std::lock_guard lock(mutex_);
  if (fd_ > 2) ::close(fd_);
  fd_ = fd;
  target_ = target;
}

void access_log::write(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  const std::lock_guard lock(mutex_);  // a line another thread writes must not split this one
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a full disk must not stop the daemon; the human log says why elsewhere
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace vlessbench
