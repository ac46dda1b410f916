// The sub-connection engine (server/sub_engine.hpp) under a fake framing: opens dial through the one dialer and
// relay both ways, a client's end half-closes, a kill ends a sub with its reason, budgets refuse an open with
// theirs (a vless.sub line each), a sub past its window pauses the engine and a stalled one ends alone, and a
// framing that holds bytes for the client's windows holds the subs' data back.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "server/sub_engine.hpp"

using namespace vlessbench;
using namespace vlessbench::vless_server;
using namespace vlessbench::vless_server::detail;

namespace {

const asio::ip::address loopback = asio::ip::make_address("127.0.0.1");

// What the engine told its framing.
struct fake_framing final : sub_framing {
  struct sent {
    std::uint16_t id;
    std::string data;
    bool from;
  };
  struct close {
    std::uint16_t id;
    std::uint32_t number;
    bool tell, error;
  };
  std::vector<sent> sends;
  std::vector<close> closes;
  std::vector<std::uint16_t> refused;
  bool hold = false;

  void send(std::uint16_t id, std::string_view data, const destination* from, std::string& out) override {
    sends.push_back({id, std::string(data), from != nullptr});
    out += data;
  }
  void closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) override {
    closes.push_back({id, number, tell, error});
    if (tell) out += "<end>";
  }
  void open_refused(std::uint16_t id, std::string& out) override {
    refused.push_back(id);
    out += "<refused>";
  }
  bool ends_after_client_end() const override { return true; }
  bool holding() const override { return hold; }
  std::string received(std::uint16_t id) const {
    std::string all;
    for (const auto& s : sends)
      if (s.id == id) all += s.data;
    return all;
  }
};

// The client: every write taken at once.
struct fake_client final : client_stream {
  std::string written;
  awaitable<io_result> read_some(asio::mutable_buffer) override { co_return io_result{asio::error::eof, 0}; }
  awaitable<io_result> write_all(asio::const_buffer from) override {
    written.append(static_cast<const char*>(from.data()), from.size());
    co_return io_result{{}, from.size()};
  }
  void cancel() override {}
};

// A runtime whose access log goes to a file of its own, a session on it, and an engine over the fakes.
struct fixture {
  asio::io_context io;
  runtime rt;
  std::filesystem::path log_path;
  session_start start;
  std::unique_ptr<session_core> s;
  fake_framing framing;
  fake_client client;
  std::unique_ptr<sub_engine> engine;

  explicit fixture(const std::function<void(limits_config&)>& limits = {}) {
    auto cfg = std::make_shared<config>(default_config());
    if (limits) limits(cfg->limits);
    rt.cfg = cfg;
    rt.live.publish(rt.cfg);
    static int n = 0;
    log_path = std::filesystem::temp_directory_path() /
               ("vlessbench-sub-engine-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".jsonl");
    std::filesystem::remove(log_path);
    rt.log.open(log_path.string());
    start.listener = std::make_shared<listener_runtime>();
    start.cfg = rt.cfg;
    start.listener_name = "raw-tls";
    start.session_id = 9;
    start.client = tcp::endpoint(loopback, 40000);
    s = std::make_unique<session_core>(rt, start);
    engine = std::make_unique<sub_engine>(*s, client, framing, io.get_executor());
    engine->start();
  }
  fixture(const fixture&) = delete;
  fixture& operator=(const fixture&) = delete;
  ~fixture() {
    bool joined = false;
    asio::co_spawn(io, engine->join(), [&](const std::exception_ptr&) { joined = true; });
    run_until([&] { return joined; });
    engine.reset();
    std::filesystem::remove(log_path);
  }

  // Runs the loop until done() (5 s at most); false: it never was.
  bool run_until(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      io.run_one_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  void run_for(std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) io.run_one_for(std::chrono::milliseconds(10));
  }

  std::vector<nlohmann::json> sub_lines() {
    REQUIRE(rt.log.flush(std::chrono::seconds(2)));
    std::ifstream in(log_path);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j["event"] == "vless.sub") out.push_back(j);
    }
    return out;
  }
};

// A destination on loopback: accepts one connection, then does what the test asks of it.
struct destination_peer {
  tcp::acceptor acceptor;
  tcp::socket sock;
  // Shared with the accept's handler: a fixture declared before the peer runs its io_context again
  // when it ends, after the peer is gone, and the handler (operation_aborted) must not write into it.
  std::shared_ptr<bool> accepted_flag = std::make_shared<bool>(false);
  explicit destination_peer(asio::io_context& io) : acceptor(io, tcp::endpoint(loopback, 0)), sock(io) {
    acceptor.async_accept(sock, [flag = accepted_flag](std::error_code ec) { *flag = !ec; });
  }
  bool accepted() const { return *accepted_flag; }
  destination at() const { return destination_of(loopback, acceptor.local_endpoint().port(), network::tcp); }
  // What has arrived, without waiting; eof once the engine half-closed.
  std::error_code take(std::string& into) {
    sock.non_blocking(true);
    char buf[4096];
    for (;;) {
      std::error_code ec;
      const std::size_t n = sock.read_some(asio::buffer(buf), ec);
      into.append(buf, n);
      if (ec) return ec == asio::error::would_block ? std::error_code() : ec;
    }
  }
};

}  // namespace

TEST_CASE("sub engine: open, data both ways, the client's end, a vless.sub line", "[sub_engine]") {
  fixture f;
  destination_peer peer(f.io);
  f.engine->open(5, peer.at(), false, std::string_view("hello"));
  CHECK(f.engine->live(5));
  CHECK(f.engine->subs() == 1);
  REQUIRE(f.run_until([&] { return peer.accepted(); }));
  std::string got;
  REQUIRE(f.run_until([&] { return !peer.take(got) && got == "hello"; }));
  f.engine->data(5, std::string("!"));
  asio::write(peer.sock, asio::buffer(std::string("world")));
  REQUIRE(f.run_until([&] { return f.framing.received(5) == "world"; }));
  CHECK(f.client.written.substr(0, vless::response_header.size()) ==
        std::string(vless::response_header.begin(), vless::response_header.end()));
  f.engine->end(5);  // half-closed after what is queued: the destination reads "!" and its EOF
  got.clear();
  REQUIRE(f.run_until([&] { return peer.take(got) == asio::error::eof; }));
  CHECK(got == "!");
  peer.sock.close();
  REQUIRE(f.run_until([&] { return !f.framing.closes.empty(); }));
  CHECK(f.framing.closes[0].id == 5);
  CHECK(f.framing.closes[0].number == 1);
  CHECK(f.framing.closes[0].tell);  // this framing answers a client's end too
  CHECK_FALSE(f.framing.closes[0].error);
  CHECK_FALSE(f.engine->live(5));
  const auto lines = f.sub_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["sub"] == 1);
  CHECK(lines[0]["mux_id"] == 5);
  CHECK(lines[0]["net"] == "tcp");
  CHECK(lines[0]["close_reason"] == "client_end");
  CHECK(lines[0]["bytes_up"] == 6);
  CHECK(lines[0]["bytes_down"] == 5);
}

TEST_CASE("sub engine: a kill ends the sub with its reason, the framing told of the error", "[sub_engine]") {
  fixture f;
  destination_peer peer(f.io);
  f.engine->open(3, peer.at(), false, std::nullopt);
  REQUIRE(f.run_until([&] { return peer.accepted(); }));
  f.engine->kill(3, "address_on_tcp_keep");
  REQUIRE(f.framing.closes.size() == 1);
  CHECK(f.framing.closes[0].tell);
  CHECK(f.framing.closes[0].error);
  const auto lines = f.sub_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["close_reason"] == "error");
  CHECK(lines[0]["error"] == "address_on_tcp_keep");
}

TEST_CASE("sub engine: budgets refuse an open with their reason", "[sub_engine]") {
  SECTION("max_mux_subs") {
    fixture f([](limits_config& l) { l.max_mux_subs = 1; });
    destination_peer peer(f.io);
    f.engine->open(1, peer.at(), false, std::nullopt);
    f.engine->open(2, peer.at(), false, std::nullopt);
    CHECK(f.framing.refused == std::vector<std::uint16_t>{2});
    CHECK(f.engine->subs() == 1);
    CHECK(f.engine->refusals() == 1);
    f.engine->end(1);  // ended by the client: its place is free again
    f.engine->open(2, peer.at(), false, std::nullopt);
    CHECK(f.engine->subs() == 2);
    f.engine->stop();
    const auto lines = f.sub_lines();
    REQUIRE(!lines.empty());
    CHECK(lines[0]["mux_id"] == 2);
    CHECK(lines[0]["close_reason"] == "rejected");
    CHECK(lines[0]["error"] == "too_many_subs");
  }
  SECTION("the client's upstream sockets") {
    fixture f([](limits_config& l) { l.max_upstreams_per_connection = 1; });
    destination_peer peer(f.io);
    f.engine->open(1, peer.at(), false, std::nullopt);
    f.engine->open(2, peer.at(), false, std::nullopt);
    CHECK(f.framing.refused == std::vector<std::uint16_t>{2});
    CHECK(f.engine->refusals() == 1);
    f.engine->stop();
    const auto lines = f.sub_lines();
    REQUIRE(!lines.empty());
    CHECK(lines[0]["mux_id"] == 2);
    CHECK(lines[0]["error"] == to_string(reject_code::client_budget));
  }
}

TEST_CASE("sub engine: a sub past its window pauses the engine, and stalled it ends alone", "[sub_engine]") {
  fixture f;
  destination_peer slow(f.io);  // accepts, never reads
  destination_peer other(f.io);
  f.engine->open(1, slow.at(), false, std::nullopt);
  f.engine->open(2, other.at(), false, std::nullopt);
  CHECK_FALSE(f.engine->paused());
  f.engine->data(1, std::string(mux_sub_queue_limit + 16 * (1u << 20), 'x'));  // past its window and any buffer
  CHECK(f.engine->paused());
  bool waited = false;
  const auto began = std::chrono::steady_clock::now();
  asio::co_spawn(f.io, f.engine->wait_for_full(), [&](const std::exception_ptr&) { waited = true; });
  REQUIRE(f.run_until([&] { return waited; }));
  CHECK(std::chrono::steady_clock::now() - began >= mux_stall_limit - std::chrono::milliseconds(50));
  CHECK_FALSE(f.engine->paused());
  CHECK_FALSE(f.engine->live(1));
  CHECK(f.engine->live(2));  // the other sub goes on
  REQUIRE(f.framing.closes.size() == 1);
  CHECK(f.framing.closes[0].id == 1);
  CHECK(f.framing.closes[0].error);
  const auto lines = f.sub_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["error"] == "sub_stalled");
}

TEST_CASE("sub engine: while the framing holds bytes for the client's windows, subs wait to read", "[sub_engine]") {
  fixture f;
  destination_peer peer(f.io);
  f.framing.hold = true;
  f.engine->open(4, peer.at(), false, std::nullopt);
  REQUIRE(f.run_until([&] { return peer.accepted(); }));
  asio::write(peer.sock, asio::buffer(std::string("later")));
  f.run_for(std::chrono::milliseconds(200));
  CHECK(f.framing.sends.empty());
  f.framing.hold = false;
  f.engine->answered();  // the client's window opened
  REQUIRE(f.run_until([&] { return f.framing.received(4) == "later"; }));
}
