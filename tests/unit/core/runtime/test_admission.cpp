// Admission (core/runtime/pending_set.hpp), the relay's minimum-rate rule (core/net/delivery_watch.hpp) and
// their [limits] keys. The pending set is shared by threads: this runs under TSan in the tsan tree.
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config/config.hpp"
#include "core/net/delivery_watch.hpp"
#include "core/runtime/pending_set.hpp"
#include "core/net/watchdog.hpp"

using namespace vlessbench;
using namespace std::chrono_literals;

namespace {

const char* loopback_target = "[[target]]\nname = \"t\"\nlisten = \"127.0.0.1:8080\"\n";

std::string limit_error(const std::string& line) {
  try {
    parse_config("[limits]\n" + line + "\n" + loopback_target, "x.toml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "<accepted>";
}

// Runs the handlers posted to io and returns how many ran.
std::size_t drain(asio::io_context& io) {
  io.restart();
  return io.poll();
}

}  // namespace

TEST_CASE("admission keys: defaults, bounds, 0 turns the rate rule off", "[config][admission]") {
  const config d = parse_config(loopback_target, "x.toml");
  CHECK(d.limits.max_pending == 1024u);
  CHECK(d.limits.pending_timeout == 10s);
  CHECK(d.limits.min_rate_bytes == 1024u);
  CHECK(d.limits.min_rate_window == 10s);
  const config c = parse_config(std::string("[limits]\nmax_pending = 7\npending_timeout_ms = 1500\n"
                                            "min_rate_bytes = 0\nmin_rate_window_ms = 250\n") +
                                    loopback_target,
                                "x.toml");
  CHECK(c.limits.max_pending == 7u);
  CHECK(c.limits.pending_timeout == 1500ms);
  CHECK(c.limits.min_rate_bytes == 0u);
  CHECK(c.limits.min_rate_window == 250ms);
  CHECK(limit_error("max_pending = 0") == "x.toml:2: limits.max_pending: 0: must be between 1 and 1000000");
  CHECK(limit_error("pending_timeout_ms = 0") ==
        "x.toml:2: limits.pending_timeout_ms: 0: must be between 1 and 3600000");
  CHECK(limit_error("min_rate_bytes = -1") == "x.toml:2: limits.min_rate_bytes: -1: must be between 0 and 1073741824");
  CHECK(limit_error("min_rate_window_ms = 0") ==
        "x.toml:2: limits.min_rate_window_ms: 0: must be between 1 and 3600000");
  CHECK(limit_error("max_pendng = 3") == "x.toml:2: limits.max_pendng: unknown key");
  // The example file shows every default.
  const config example =
      load_config_file(std::filesystem::path(VLESSBENCH_SOURCE_DIR) / "config" / "vlessbenchd.example.toml");
  CHECK(example.limits.max_pending == d.limits.max_pending);
  CHECK(example.limits.pending_timeout == d.limits.pending_timeout);
  CHECK(example.limits.min_rate_bytes == d.limits.min_rate_bytes);
  CHECK(example.limits.min_rate_window == d.limits.min_rate_window);
}

TEST_CASE("pending cap: max_pending, at most half the descriptor limit", "[admission]") {
  CHECK(pending_cap(1024, 65536) == 1024);
  CHECK(pending_cap(1024, 64) == 32);
  CHECK(pending_cap(1024, 1) == 1);  // never 0: a new connection always gets in
  CHECK(pending_cap(5, RLIM_INFINITY) == 5);
}

TEST_CASE("pending set: at the cap the oldest pending connection is evicted", "[admission]") {
  asio::io_context io{1};
  pending_set set;
  std::vector<int> closed;
  std::vector<pending_set::ticket> tickets;
  for (int i = 0; i < 3; ++i) {
    std::size_t evicted = 99;
    tickets.push_back(set.admit(io.get_executor(), 3, &evicted));
    CHECK(evicted == 0);
    REQUIRE(tickets.back().arm([&closed, i] { closed.push_back(i); }));
  }
  CHECK(set.size() == 3);

  SECTION("a fourth evicts the first, on the first's executor") {
    std::size_t evicted = 0;
    tickets.push_back(set.admit(io.get_executor(), 3, &evicted));
    CHECK(evicted == 1);
    CHECK(set.size() == 3);
    CHECK(closed.empty());  // posted, not run inline
    drain(io);
    CHECK(closed == std::vector<int>{0});
    CHECK(set.evicted_total() == 1);
    // The evicted one leaving later changes nothing; the next eviction takes the next oldest.
    tickets[0].leave();
    CHECK(set.size() == 3);
    tickets.push_back(set.admit(io.get_executor(), 3));
    drain(io);
    CHECK(closed == std::vector<int>{0, 1});
  }
  SECTION("one admitted (left) before the eviction runs is not closed") {
    tickets.push_back(set.admit(io.get_executor(), 3));  // evicts #0 ...
    tickets[0].leave();                                  // ... which leaves before the post runs
    drain(io);
    CHECK(closed.empty());
  }
  SECTION("admitted connections are never evicted") {
    tickets[0].leave();
    tickets[1].leave();
    CHECK(set.size() == 1);
    tickets.push_back(set.admit(io.get_executor(), 2));
    tickets.push_back(set.admit(io.get_executor(), 2));  // evicts #2, the oldest still pending
    drain(io);
    CHECK(closed == std::vector<int>{2});
  }
  SECTION("evicted before it armed: arm says so") {
    pending_set small;
    auto first = small.admit(io.get_executor(), 1);
    auto second = small.admit(io.get_executor(), 1);
    drain(io);
    CHECK_FALSE(first.arm([] {}));
    CHECK(second.arm([] {}));
  }
  SECTION("a ticket destroyed leaves the set") {
    tickets.clear();
    CHECK(set.size() == 0);
  }
}

TEST_CASE("pending set across threads: admitted on one, armed, left and evicted on others", "[admission]") {
  pending_set set;
  asio::io_context main_io{1};
  constexpr int workers = 3, per_worker = 300;
  std::atomic<int> fired{0};
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (int w = 0; w < workers; ++w) ios.push_back(std::make_unique<asio::io_context>(1));
  // Each worker admits its own connections (as the accept loop would hand them over), arms them
  // on its own context, leaves half of them, and runs whatever evictions were posted to it.
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto& io = *ios[w];
      std::vector<pending_set::ticket> mine;
      for (int i = 0; i < per_worker; ++i) {
        mine.push_back(set.admit(io.get_executor(), 50));
        (void)mine.back().arm([&fired] { ++fired; });
        if (i % 2 == 0) mine.back().leave();
        io.restart();
        io.poll();
      }
      io.restart();
      io.poll();
    });
  }
  for (auto& t : threads) t.join();
  CHECK(set.size() <= 50);
  CHECK(fired.load() <= static_cast<int>(set.evicted_total()));
}

TEST_CASE("delivery watch: a write the peer does not take for a whole window is slow", "[admission]") {
  delivery_watch w;
  SECTION("nothing in flight is idle, never slow") {
    for (int i = 0; i < 5; ++i) CHECK(w.on_window(false, 0, 1000));
  }
  SECTION("waiting, then no progress over the next window") {
    CHECK(w.on_window(true, 5000, 1000));  // the first sample only arms
    CHECK_FALSE(w.on_window(true, 5999, 1000));
  }
  SECTION("waiting with enough progress every window") {
    CHECK(w.on_window(true, 0, 1000));
    CHECK(w.on_window(true, 1000, 1000));
    CHECK(w.on_window(true, 2500, 1000));
    CHECK_FALSE(w.on_window(true, 2600, 1000));
  }
  SECTION("a gap with nothing in flight starts over") {
    CHECK(w.on_window(true, 0, 1000));
    CHECK(w.on_window(false, 0, 1000));
    CHECK(w.on_window(true, 10, 1000));  // arms again
    CHECK_FALSE(w.on_window(true, 20, 1000));
  }
}

TEST_CASE("watchdog: an on_expire returning false moved the deadline and is asked again", "[admission]") {
  // The relay's rate samples ride on the session's watchdog this way.
  asio::io_context io{1};
  watchdog_deadline deadline;
  int calls = 0;
  bool ended = false;
  deadline = steady_clock::now() + 5ms;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        co_await watchdog(deadline, [&] {
          ++calls;
          if (calls == 3) return true;
          deadline = steady_clock::now() + 5ms;
          return false;
        });
        ended = true;
      },
      asio::detached);
  io.run_for(2s);
  CHECK(calls == 3);
  CHECK(ended);
}
