// The state threads share when [limits] threads > 1: connection set, route registry, phases,
// shared TCP policy. Run under TSan by the tsan tree (tools/test.sh).
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/log/access_log.hpp"
#include "core/wire/route_header.hpp"
#include "core/runtime/connection_set.hpp"
#include "core/runtime/listener_runtime.hpp"
#include "core/runtime/route_registry.hpp"

using namespace vlessbench;

namespace {

// An io_context running on its own thread until stopped.
struct io_thread {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  std::thread::id id() const { return thread.get_id(); }
  ~io_thread() {
    guard.reset();
    thread.join();
  }
};

// Runs f on the io_context's thread and waits for it.
template <class F>
void run_on(io_thread& t, F f) {
  std::atomic<bool> done{false};
  asio::post(t.io, [&] {
    f();
    done = true;
  });
  while (!done) std::this_thread::yield();
}

}  // namespace

TEST_CASE("connection_set runs every closer on its connection's thread") {
  connection_set set;
  io_thread a;
  io_thread b;
  std::atomic<int> closed_on_a{0};
  std::atomic<int> closed_on_b{0};
  std::atomic<int> wrong_thread{0};
  std::vector<std::uint64_t> ids_a;
  std::vector<std::uint64_t> ids_b;
  run_on(a, [&] {
    for (int i = 0; i < 10; ++i)
      ids_a.push_back(set.add(a.io.get_executor(), [&](bool force) {
        if (std::this_thread::get_id() != a.id()) ++wrong_thread;
        if (force) ++closed_on_a;
      }));
  });
  run_on(b, [&] {
    for (int i = 0; i < 7; ++i)
      ids_b.push_back(set.add(b.io.get_executor(), [&](bool force) {
        if (std::this_thread::get_id() != b.id()) ++wrong_thread;
        if (force) ++closed_on_b;
      }));
  });
  REQUIRE(set.size() == 17);
  // One connection on b leaves before the closers run: its closer must not be called.
  run_on(b, [&] { set.remove(ids_b.back()); });
  set.close_all(true);
  run_on(a, [] {});  // the posted closers ran before these
  run_on(b, [] {});
  CHECK(closed_on_a == 10);
  CHECK(closed_on_b == 6);
  CHECK(wrong_thread == 0);
  for (auto id : ids_a) set.remove(id);
  for (auto id : ids_b) set.remove(id);
  CHECK(set.size() == 0);
}

TEST_CASE("connection_set: a closer may remove its own entry") {
  connection_set set;
  asio::io_context io{1};
  std::uint64_t id = 0;
  int calls = 0;
  id = set.add(io.get_executor(), [&](bool) {
    ++calls;
    set.remove(id);
  });
  set.close_all(false);
  CHECK(calls == 0);  // posted, not called in place
  io.run();
  CHECK(calls == 1);
  CHECK(set.size() == 0);
}

TEST_CASE("route_registry and phases: sessions on two threads, lookups on a third") {
  route_registry routes;
  const asio::ip::tcp::endpoint target(asio::ip::make_address_v4("127.0.0.1"), 8080);
  constexpr int per_thread = 2000;
  std::atomic<bool> go{false};
  std::atomic<int> found{0};
  std::atomic<int> bad{0};  // Catch2's assertions are not thread-safe: count, check after join
  auto session_thread = [&](unsigned short base) {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < per_thread; ++i) {
      const asio::ip::tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"),
                                       static_cast<unsigned short>(base + i % 500));
      auto info = std::make_shared<route_info>();
      info->session_id = static_cast<std::uint64_t>(i) + 1;
      info->user = "u";
      const route_registration reg(routes, flow_id::tcp(ep, target), info);
      info->phases.first_upstream_byte = i;  // written after registration, as a session does
      info->phases.closed = i + 1;
    }
  };
  auto lookup_thread = [&] {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < 3 * per_thread; ++i) {
      const asio::ip::tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"),
                                       static_cast<unsigned short>(20000 + i % 1000));
      if (auto r = routes.find(flow_id::tcp(ep, target))) {
        // A snapshot of the phases must be internally readable while the session writes them.
        const session_phases snapshot = r->phases;
        if (snapshot.closed.get() != -1 && snapshot.closed.get() < 1) ++bad;
        if (r->user != "u" || r->session_id == 0) ++bad;
        if (!format_server_timing(r->phases).empty()) ++bad;  // no phase before "upstream" was set
        ++found;
      }
    }
  };
  std::thread s1(session_thread, 20000);
  std::thread s2(session_thread, 20500);
  std::thread l(lookup_thread);
  go = true;
  s1.join();
  s2.join();
  l.join();
  CHECK(bad == 0);
  CHECK(routes.size() == 0);  // every registration removed itself
}

TEST_CASE("shared_tcp_policy round-trips every policy") {
  for (bool nodelay : {false, true})
    for (auto q : {quickack_mode::kernel, quickack_mode::on, quickack_mode::off}) {
      shared_tcp_policy p(tcp_policy{!nodelay, quickack_mode::kernel});
      p = tcp_policy{nodelay, q};
      CHECK(p.load() == tcp_policy{nodelay, q});
    }
}

TEST_CASE("access_log: lines written from several threads never interleave") {
  access_log log;
  const auto path =
      std::filesystem::temp_directory_path() / ("vlessbench-log-" + std::to_string(::getpid()) + ".jsonl");
  log.open(path.string());
  constexpr int per_thread = 500;
  auto writer = [&](char c) {
    const std::string line = "{\"x\":\"" + std::string(3000, c) + "\"}\n";
    for (int i = 0; i < per_thread; ++i) log.write(line);
  };
  std::thread t1(writer, 'a');
  std::thread t2(writer, 'b');
  // A reopen while they write (rotation on reload) must not lose or split a line.
  log.open(path.string());
  t1.join();
  t2.join();
  log.open("stdout");
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    REQUIRE(line.size() == 3008);
    const char c = line[6];
    CHECK(line == "{\"x\":\"" + std::string(3000, c) + "\"}");
  }
  CHECK(lines == 2 * per_thread);
  std::filesystem::remove(path);
}
