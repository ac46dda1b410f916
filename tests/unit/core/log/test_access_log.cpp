// The access log's queue: a stalled reader never blocks a writer; the queue is bounded in bytes,
// what does not fit is dropped, counted and reported in order; nothing is lost while it fits;
// a reopen stays ordered behind the queued lines; shutdown gives up on a stalled reader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log/access_log.hpp"

using namespace vlessbench;
using namespace std::chrono_literals;

namespace {

// A FIFO with a reader that reads only when told to, and a way to fill it to the last byte so
// that every write to it would block.
class stalled_fifo {
 public:
  stalled_fifo() {
    dir_ = std::filesystem::temp_directory_path() / ("vlessbench-access-log-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = dir_ / "fifo";
    std::filesystem::remove(path_);
    REQUIRE(::mkfifo(path_.c_str(), 0600) == 0);
    reader_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader_ >= 0);
  }
  ~stalled_fifo() {
    if (filler_ >= 0) ::close(filler_);
    ::close(reader_);
    std::filesystem::remove_all(dir_);
  }
  stalled_fifo(const stalled_fifo&) = delete;
  stalled_fifo& operator=(const stalled_fifo&) = delete;

  std::string path() const { return path_.string(); }
  std::filesystem::path dir() const { return dir_; }

  // Whole pages first, then single bytes: afterwards not even one byte fits.
  void fill() {
    filler_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(filler_ >= 0);
    const std::string page(4096, 'x');
    while (::write(filler_, page.data(), page.size()) > 0) filled_ += page.size();
    while (::write(filler_, "x", 1) > 0) ++filled_;
    REQUIRE(errno == EAGAIN);
  }

  // Everything readable now.
  std::string read_available() {
    std::string out;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(reader_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  // Reads until the log has nothing queued (bounded), then returns what came after the filler.
  std::string drain(access_log& log) {
    std::string out;
    for (int i = 0; i < 500; ++i) {
      out += read_available();
      if (log.flush(10ms)) break;
    }
    return after_filler(out + read_available());
  }
  std::string after_filler(const std::string& read) {
    const auto skip = std::min(read.size(), filled_);
    CHECK(read.substr(0, skip) == std::string(skip, 'x'));
    filled_ -= skip;
    return read.substr(skip);
  }

 private:
  std::filesystem::path dir_, path_;
  int reader_ = -1, filler_ = -1;
  std::size_t filled_ = 0;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  CHECK(start == text.size());  // no half line at the end
  return out;
}

// {"event":"t","i":N,"pad":"....."}\n, exactly 100 bytes. No Catch macros: writer threads call it.
std::string test_line(int i) {
  std::string head = "{\"event\":\"t\",\"i\":" + std::to_string(i) + ",\"pad\":\"";
  return head + std::string(100 - head.size() - 3, 'p') + "\"}\n";
}

std::string field(const std::string& line, const std::string& key) {
  const auto k = "\"" + key + "\":";
  const auto at = line.find(k);
  if (at == std::string::npos) return {};
  const auto from = at + k.size();
  return line.substr(from, line.find_first_of(",}", from) - from);
}

}  // namespace

TEST_CASE("access_log: a stalled reader: bounded queue, drops counted and reported in order", "[access_log]") {
  REQUIRE(test_line(0).size() == 100);
  REQUIRE(test_line(99999).size() == 100);
  stalled_fifo fifo;
  access_log log(10 * 100);
  log.open(fifo.path());
  fifo.fill();

  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 25; ++i) log.write(test_line(i));
  // None of that waited for the reader (a blocking write would never have returned).
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  auto c = log.counters();
  CHECK(c.queued_bytes == 10 * 100);  // the first ten fit, the rest did not
  CHECK(c.dropped_lines == 15);
  CHECK(c.dropped_bytes == 15 * 100);
  CHECK_FALSE(log.flush(50ms));

  const auto lines = lines_of(fifo.drain(log));
  REQUIRE(lines.size() == 11);
  for (int i = 0; i < 10; ++i) CHECK(lines[static_cast<std::size_t>(i)] + "\n" == test_line(i));
  CHECK(field(lines[10], "event") == "\"log.dropped\"");
  CHECK(field(lines[10], "lines") == "15");
  CHECK(field(lines[10], "bytes") == "1500");
  CHECK(field(lines[10], "total_lines") == "15");

  // Caught up: the next line is written at once, and nothing more is dropped.
  log.write(test_line(100));
  CHECK(lines_of(fifo.read_available()) == std::vector<std::string>{test_line(100).substr(0, 99)});
  CHECK(log.counters().dropped_lines == 15);
  CHECK(log.counters().queued_bytes == 0);
}

TEST_CASE("access_log: max_lines_per_second drops a flood, counts it and reports it with reason rate", "[access_log]") {
  const auto path =
      std::filesystem::temp_directory_path() / ("vlessbench-rate-" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  {
    access_log log;
    log.set_max_lines_per_second(10);
    log.open(path.string());
    for (int i = 0; i < 50; ++i) log.write(test_line(i));  // far faster than 10 a second
    const auto c = log.counters();
    // A burst of one second's worth (10, plus at most a token or two refilled meanwhile).
    CHECK(c.rate_dropped_lines >= 38);
    CHECK(c.rate_dropped_lines <= 40);
    CHECK(c.dropped_lines == c.rate_dropped_lines);
    REQUIRE(log.flush(1s));
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    REQUIRE(lines.size() == 50 - c.rate_dropped_lines + 1);
    CHECK(field(lines.back(), "event") == "\"log.dropped\"");
    CHECK(field(lines.back(), "reason") == "\"rate\"");
    CHECK(field(lines.back(), "lines") == std::to_string(c.rate_dropped_lines));
    CHECK(field(lines.back(), "max_lines_per_second") == "10");
    log.set_max_lines_per_second(0);  // no bound: nothing more dropped
    for (int i = 0; i < 50; ++i) log.write(test_line(i));
    CHECK(log.counters().dropped_lines == c.rate_dropped_lines);
  }
  std::filesystem::remove(path);
}

TEST_CASE("access_log: authenticated sessions' lines have a rate budget of their own", "[access_log]") {
  const auto path =
      std::filesystem::temp_directory_path() / ("vlessbench-classes-" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  const auto read_lines = [&] {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  };
  {
    access_log log;
    log.set_max_lines_per_second(10);
    log.set_max_session_lines_per_second(10);
    log.open(path.string());
    // A flood of other lines (direct clients) beside a run's few session lines: none of the
    // session's is dropped.
    for (int i = 0; i < 50; ++i) {
      log.write(test_line(i));
      if (i % 10 == 0) log.write(test_line(1000 + i), access_log::line_class::session);
    }
    auto c = log.counters();
    CHECK(c.rate_dropped_lines >= 38);
    CHECK(c.session_rate_dropped_lines == 0);
    REQUIRE(log.flush(1s));
    auto lines = read_lines();
    for (int i = 0; i < 50; i += 10)
      CHECK(std::count(lines.begin(), lines.end(), test_line(1000 + i).substr(0, 99)) == 1);
    CHECK(field(lines.back(), "reason") == "\"rate\"");

    // A session's own flood is bounded by its own key and reported with its reason.
    for (int i = 0; i < 50; ++i) log.write(test_line(2000 + i), access_log::line_class::session);
    c = log.counters();
    CHECK(c.session_rate_dropped_lines >= 40);  // 5 of the 10 tokens went to the lines above
    CHECK(c.session_rate_dropped_lines <= 46);
    CHECK(c.dropped_lines == c.rate_dropped_lines + c.session_rate_dropped_lines);
    REQUIRE(log.flush(1s));
    lines = read_lines();
    CHECK(field(lines.back(), "event") == "\"log.dropped\"");
    CHECK(field(lines.back(), "reason") == "\"session_rate\"");
    CHECK(field(lines.back(), "lines") == std::to_string(c.session_rate_dropped_lines));
    CHECK(field(lines.back(), "max_session_lines_per_second") == "10");
  }
  std::filesystem::remove(path);
}

TEST_CASE("access_log: the first line queued after a drop is preceded by its report", "[access_log]") {
  stalled_fifo fifo;
  access_log log(3 * 100);
  log.open(fifo.path());
  fifo.fill();
  for (int i = 0; i < 5; ++i) log.write(test_line(i));  // 3 queued, 2 dropped
  log.set_queue_bytes(1000);                            // room again, the reader still stalled
  log.write(test_line(5));
  const auto lines = lines_of(fifo.drain(log));
  REQUIRE(lines.size() == 5);
  for (int i = 0; i < 3; ++i) CHECK(lines[static_cast<std::size_t>(i)] + "\n" == test_line(i));
  CHECK(field(lines[3], "event") == "\"log.dropped\"");
  CHECK(field(lines[3], "lines") == "2");
  CHECK(lines[4] + "\n" == test_line(5));
}

TEST_CASE("access_log: a reopen is ordered behind the lines queued before it", "[access_log]") {
  stalled_fifo fifo;
  access_log log;
  log.open(fifo.path());
  fifo.fill();
  const auto file = fifo.dir() / "rotated.jsonl";
  for (int i = 0; i < 3; ++i) log.write(test_line(i));
  log.open(file.string());
  log.open(file.string());  // twice behind a stalled reader: one file, opened once more
  for (int i = 3; i < 5; ++i) log.write(test_line(i));
  CHECK(log.target() == file.string());
  CHECK(std::filesystem::file_size(file) == 0);  // behind the stalled lines

  const auto to_fifo = lines_of(fifo.drain(log));
  REQUIRE(to_fifo.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(to_fifo[static_cast<std::size_t>(i)] + "\n" == test_line(i));
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == test_line(3) + test_line(4));
  CHECK(log.counters().dropped_lines == 0);
}

TEST_CASE("access_log: shutdown gives up on a stalled reader at its deadline", "[access_log]") {
  stalled_fifo fifo;
  auto log = std::make_unique<access_log>();
  log->open(fifo.path());
  fifo.fill();
  for (int i = 0; i < 5; ++i) log->write(test_line(i));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(log->shutdown(200ms) == 5);
  log.reset();  // the destructor does not wait again
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(fifo.after_filler(fifo.read_available()).empty());  // not half a line either
}

TEST_CASE("access_log: nothing is lost while the queue is not full (threads, a slow reader)", "[access_log]") {
  stalled_fifo fifo;
  constexpr int threads = 4, per_thread = 1000;  // 400 KB in all: less than pipe + queue
  access_log log(1u << 20);
  log.open(fifo.path());
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([&log, t] {
      for (int i = 0; i < per_thread; ++i) log.write(test_line(t * per_thread + i));
    });
  // Meanwhile: reopen the same FIFO (rotation on reload) and read slowly.
  std::string out;
  for (int i = 0; i < 20; ++i) {
    if (i == 5) log.open(fifo.path());
    out += fifo.read_available();
    std::this_thread::sleep_for(2ms);
  }
  for (auto& w : writers) w.join();
  out += fifo.drain(log);
  const auto lines = lines_of(out);
  CHECK(log.counters().dropped_lines == 0);
  REQUIRE(lines.size() == threads * per_thread);
  std::vector<int> next(threads, 0);
  for (const auto& line : lines) {
    const int i = std::stoi(field(line, "i"));
    REQUIRE(line + "\n" == test_line(i));  // whole, never interleaved
    const int t = i / per_thread;
    CHECK(i % per_thread == next[static_cast<std::size_t>(t)]);  // each writer's order kept
    next[static_cast<std::size_t>(t)] = i % per_thread + 1;
  }
}
