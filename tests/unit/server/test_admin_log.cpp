// GET /api/log's streaming (server/admin_log.hpp) on loopback: a long scan that finds nothing is
// not a stalled reader, and a reader that stops reading is still cut.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/net/asio_compat.hpp"
#include "server/admin_log.hpp"

using namespace vlessbench;
using steady_clock = std::chrono::steady_clock;

namespace {

struct log_file {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("vlessbench-admin-log-" + std::to_string(::getpid()) + ".jsonl");
  // `filler` bytes of another run's lines, then `hole` bytes the file system does not store (they
  // read as zeros: one over-long line the scan skips, read from no disk), then one line of run
  // "wanted".
  explicit log_file(std::size_t filler, std::uint64_t hole = 0) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string other =
        R"({"event":"http.request","ts":"2026-12-05T01:00:00Z","run":"other","seq":1,"path":"/generate_204"})"
        "\n";
    for (std::size_t n = 0; n < filler; n += other.size()) out << other;
    if (hole > 0) {
      out.seekp(static_cast<std::streamoff>(hole), std::ios::cur);
      out << "\n";
    }
    out << R"({"event":"http.request","ts":"2026-12-05T01:00:01Z","run":"wanted","seq":7})"
        << "\n";
  }
  ~log_file() { std::filesystem::remove(path); }
};

struct stream_fixture {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  tcp::socket client{io};
  bool served = false;
  steady_clock::duration serve_time{};

  void serve(const std::string& file, std::chrono::milliseconds write_timeout) {
    asio::co_spawn(
        io,
        [&, file, write_timeout]() -> awaitable<void> {
          auto s = co_await acceptor.async_accept(use_awaitable);
          const auto start = steady_clock::now();
          log_query q;
          q.run = "wanted";
          co_await admin::stream_log(s, file, q, false, log_answer_cap, write_timeout);
          serve_time = steady_clock::now() - start;
          served = true;
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    client.connect(acceptor.local_endpoint());
  }
};

}  // namespace

TEST_CASE("/api/log: a scan longer than the write timeout still answers whole", "[admin][log]") {
  // 1 MB of other runs' lines and a 384 MiB hole take far longer to scan than the write timeout; the
  // reader reads all along. The timeout is long enough that a write the kernel takes at once is
  // never cut by the scheduler's delay alone (20 ms was not, under ASan on two loaded cores).
  const auto write_timeout = std::chrono::milliseconds(150);
  const log_file f(1u << 20, std::uint64_t{384} << 20);
  stream_fixture t;
  t.serve(f.path.string(), write_timeout);
  std::string got;
  std::array<char, 64 * 1024> buf{};
  asio::co_spawn(
      t.io,
      [&]() -> awaitable<void> {
        for (;;) {
          auto [ec, n] = co_await t.client.async_read_some(asio::buffer(buf), as_tuple_awaitable);
          if (ec) break;
          got.append(buf.data(), n);
        }
      },
      asio::detached);
  t.io.run_for(std::chrono::seconds(60));
  REQUIRE(t.served);
  CHECK(t.serve_time > write_timeout);  // else this test shows nothing
  CHECK_THAT(got, Catch::Contains(R"("run":"wanted","seq":7})"));
  CHECK_THAT(got, Catch::Contains(R"("event":"log.end")") && Catch::Contains(R"("complete":true)"));
}

TEST_CASE("/api/log: a reader that stops reading is cut after the write timeout", "[admin][log]") {
  // Every line selected: the answer fills the socket buffers and the write waits on the reader.
  const log_file f(0);
  {
    std::ofstream more(f.path, std::ios::binary | std::ios::app);
    const std::string line = R"({"event":"http.request","ts":"2026-12-05T01:00:02Z","run":"wanted","seq":8})"
                             "\n";
    for (std::size_t n = 0; n < (32u << 20); n += line.size()) more << line;
  }
  stream_fixture t;
  t.serve(f.path.string(), std::chrono::milliseconds(200));
  const auto start = steady_clock::now();
  t.io.run_for(std::chrono::seconds(20));
  REQUIRE(t.served);  // the stream ended while the client read nothing
  CHECK(steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(t.serve_time >= std::chrono::milliseconds(200));
}
