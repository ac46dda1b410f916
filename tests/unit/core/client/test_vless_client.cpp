// The one VLESS client (core/client/vless_client.hpp) against a scripted TLS server on loopback: what it
// sends (header and first request in one TLS record, or the header alone when split) and how it
// reads the response header (whole, split over reads, malformed).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bytes.hpp"
#include "core/net/tls.hpp"
#include "core/client/vless_client.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;

namespace {

constexpr std::string_view request = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";

struct fixture {
  asio::io_context io;
  asio::ssl::context server_tls = tls::make_server_context(tls_config{});
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  vless::client_plan plan;
  std::vector<std::string> server_reads;  // what each SSL_read returned: one TLS record at most

  explicit fixture(bool split) {
    tls::client_options opts;
    opts.sni = "localhost";
    const auto uuid = vless::parse_uuid("b831381d-6324-4d53-ad4f-8cda48b30811");
    plan = vless::make_client_plan(acceptor.local_endpoint(), opts, vless::tcp_request(*uuid, "127.0.0.1", 8080));
    plan.split_header = split;
  }

  // Accepts one connection, reads until header + request are in, then sends replies one write
  // (one TLS record) each, with a pause between them so they arrive as separate reads.
  awaitable<void> serve(std::vector<std::string> replies) {
    auto socket = co_await acceptor.async_accept(use_awaitable);
    asio::ssl::stream<tcp::socket> s(std::move(socket), server_tls);
    co_await s.async_handshake(asio::ssl::stream_base::server, use_awaitable);
    std::string got;
    char buf[4096];
    while (got.size() < plan.header.size() + request.size()) {
      const auto n = co_await s.async_read_some(asio::buffer(buf), use_awaitable);
      server_reads.emplace_back(buf, n);
      got.append(buf, n);
    }
    CHECK(got == plan.header + std::string(request));
    asio::steady_timer pause(io);
    for (const auto& r : replies) {
      co_await asio::async_write(s, asio::buffer(r), use_awaitable);
      pause.expires_after(std::chrono::milliseconds(20));
      co_await pause.async_wait(use_awaitable);
    }
  }

  // Opens, writes the request, reads until `want` payload bytes or an error.
  awaitable<std::error_code> fetch(std::string& payload, std::size_t want) {
    tcp::socket socket(io);
    vless::client c(socket, plan);
    if (auto ec = co_await c.connect()) co_return ec;
    if (auto ec = co_await c.handshake()) co_return ec;
    if (c.splits_header())
      if (auto ec = co_await c.send_header()) co_return ec;
    if (auto ec = co_await c.write(request)) co_return ec;
    char buf[4096];
    while (payload.size() < want) {
      std::size_t n = 0;
      if (auto ec = co_await c.read_some(buf, sizeof buf, n)) co_return ec;
      CHECK(n > 0);
      payload.append(buf, n);
    }
    CHECK_FALSE(c.response_pending());
    co_return std::error_code{};
  }

  std::error_code run(std::vector<std::string> replies, std::string& payload, std::size_t want) {
    std::error_code result;
    asio::co_spawn(io, serve(std::move(replies)), asio::detached);
    asio::co_spawn(
        io, [&]() -> awaitable<void> { result = co_await fetch(payload, want); }, asio::detached);
    io.run_for(std::chrono::seconds(10));
    return result;
  }
};

}  // namespace

TEST_CASE("vless client: header and first request in one TLS record, response header taken off", "[vless_client]") {
  fixture f(false);
  std::string payload;
  REQUIRE_FALSE(f.run({bytes({0, 0}) + "HTTP/1.1 204 No Content\r\n\r\n"}, payload, 27));
  CHECK(payload == "HTTP/1.1 204 No Content\r\n\r\n");
  REQUIRE(f.server_reads.size() == 1);  // one SSL_read returns one record at most
}

TEST_CASE("vless client: split writes send the header as its own record", "[vless_client]") {
  fixture f(true);
  std::string payload;
  REQUIRE_FALSE(f.run({bytes({0, 0}), "abc"}, payload, 3));
  CHECK(payload == "abc");
  REQUIRE(f.server_reads.size() == 2);
  CHECK(f.server_reads[0] == f.plan.header);
}

TEST_CASE("vless client: a response header split over reads, with addons", "[vless_client]") {
  fixture f(false);
  std::string payload;
  REQUIRE_FALSE(f.run({bytes({0}), bytes({3, 'x'}), "yzpayload"}, payload, 7));
  CHECK(payload == "payload");
}

TEST_CASE("vless client: a malformed response header is an error with the reason", "[vless_client]") {
  fixture f(false);
  std::string payload;
  const auto ec = f.run({bytes({1, 0}) + "HTTP/1.1 200 OK\r\n\r\n"}, payload, 1);
  CHECK(ec == vless::client_errc::bad_response);
  CHECK(ec.message() == "vless response: bad_version");
  CHECK(payload.empty());
}
