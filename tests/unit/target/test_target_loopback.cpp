// In-process loopback tier: the real target connection code on port 0, a client coroutine, and a
// route the test registers itself (as a VLESS session would).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/wire/http_parser.hpp"
#include "target/http_target.hpp"

using namespace vlessbench;

namespace {

struct fixture {
  asio::io_context io;
  access_log log;
  route_registry routes;
  connection_set connections;
  std::atomic<bool> stopping{false};
  state_hub hub;
  target::target_context ctx{log, routes, connections, stopping, [] { return limits_config{}; }, hub};
  std::shared_ptr<listener_runtime> listener = std::make_shared<listener_runtime>();
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::filesystem::path log_path;

  fixture() {
    listener->name = "http";
    listener->kind = listener_kind::target;
    log_path =
        std::filesystem::temp_directory_path() / ("vlessbench-target-test-" + std::to_string(::getpid()) + ".jsonl");
    std::filesystem::remove(log_path);
    log.open(log_path.string());
  }
  ~fixture() { std::filesystem::remove(log_path); }

  awaitable<void> accept_one() {
    tcp::endpoint peer;
    auto s = co_await acceptor.async_accept(peer, use_awaitable);
    co_await target::serve_connection(ctx, listener, std::move(s), peer);
  }

  std::string log_text() const {
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

// Sends raw bytes, reads until the peer closes, returns everything read.
awaitable<std::string> exchange(tcp::socket& s, std::string request) {
  co_await asio::async_write(s, asio::buffer(request), use_awaitable);
  std::string out;
  char buf[4096];
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), as_tuple_awaitable);
    if (ec) break;
    out.append(buf, n);
  }
  co_return out;
}

}  // namespace

TEST_CASE("target marks a registered upstream endpoint as a VLESS route", "[target][route]") {
  fixture f;
  std::string direct_reply, vless_reply;
  auto ep = f.acceptor.local_endpoint();

  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        // First connection: unregistered -> direct.
        {
          tcp::socket s(f.io);
          co_await s.async_connect(ep, use_awaitable);
          direct_reply = co_await exchange(s, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        }
        // Second: registered under its local endpoint, as a VLESS session registers its upstream.
        tcp::socket s(f.io);
        co_await s.async_connect(ep, use_awaitable);
        auto info = std::make_shared<route_info>();
        info->session_id = 42;
        info->user = "tester";
        info->client = "192.0.2.7:5555";
        info->listener = "default-ack";
        info->phases.tls_done = 1500;
        info->phases.header_complete = 1600;
        info->phases.upstream_connected = 1700;
        route_registration reg(f.routes, flow_id::tcp(s.local_endpoint(), s.remote_endpoint()), info);
        vless_reply =
            co_await exchange(s,
                              "GET /generate_204 HTTP/1.1\r\nHost: t\r\nX-Vlessbench-Run: r1\r\nX-Vlessbench-Seq: 7\r\n"
                              "X-Vlessbench-Path: ctl\r\nConnection: close\r\n\r\n");
      },
      asio::detached);
  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        co_await f.accept_one();
        co_await f.accept_one();
      },
      asio::detached);
  f.io.run_for(std::chrono::seconds(5));

  CHECK(direct_reply.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(direct_reply.find("X-Vlessbench-Route: direct\r\n") != std::string::npos);
  CHECK(direct_reply.find("Server-Timing") == std::string::npos);

  CHECK(vless_reply.starts_with("HTTP/1.1 204 No Content\r\n"));
  CHECK(vless_reply.find("X-Vlessbench-Route: vless session=42 user=tester\r\n") != std::string::npos);
  CHECK(vless_reply.find("Server-Timing: tls;dur=1.500, vless;dur=0.100, upstream;dur=0.100\r\n") != std::string::npos);
  CHECK(f.routes.size() == 0);  // unregistered when the registration ended

  const auto log = f.log_text();
  CHECK(log.find("\"route\":\"direct\"") != std::string::npos);
  CHECK(log.find("\"route\":\"vless\",\"vless_session\":42,\"vless_user\":\"tester\","
                 "\"vless_client\":\"192.0.2.7:5555\"") != std::string::npos);
  CHECK(log.find("\"run\":\"r1\",\"seq\":\"7\",\"path_label\":\"ctl\"") != std::string::npos);
}

TEST_CASE("target answers pipelined requests in order and 400 closes", "[target]") {
  fixture f;
  std::string reply;
  auto ep = f.acceptor.local_endpoint();
  asio::co_spawn(
      f.io,
      [&]() -> awaitable<void> {
        tcp::socket s(f.io);
        co_await s.async_connect(ep, use_awaitable);
        reply = co_await exchange(s,
                                  "GET /bytes/5 HTTP/1.1\r\nHost: t\r\n\r\n"
                                  "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
                                  "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"
                                  "BROKEN\r\n\r\n"
                                  "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
      },
      asio::detached);
  asio::co_spawn(f.io, f.accept_one(), asio::detached);
  f.io.run_for(std::chrono::seconds(5));

  // Walk the responses with the same parser the runner uses.
  std::string_view rest = reply;
  std::vector<int> statuses;
  std::vector<std::string> bodies;
  while (!rest.empty()) {
    auto r = http::parse_response(rest);
    REQUIRE(r.complete());
    std::size_t body = 0;
    if (r.value.content_length && statuses.size() != 1) body = *r.value.content_length;  // HEAD: none
    statuses.push_back(r.value.status);
    bodies.emplace_back(rest.substr(r.consumed, body));
    rest.remove_prefix(r.consumed + body);
  }
  REQUIRE(statuses == std::vector<int>{200, 200, 404, 400});
  CHECK(bodies[0] == "abcde");
  CHECK(bodies[1].empty());
}
