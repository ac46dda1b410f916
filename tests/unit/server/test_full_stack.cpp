// In-process tier, whole path: the one VLESS client (core/client/vless_client) → the daemon's VLESS
// session over raw TLS (server/) → the HTTP target (target/), all on loopback port 0 in one
// io_context, with no daemon binary and no Python. Checks what the product promises: the target
// names the relaying session and user in its route header, the session's phases reach the client
// as Server-Timing, the access log carries one vless.session and the matching http.request lines,
// and a direct request is told apart.
#include <catch2/catch.hpp>

#include <regex>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config/config.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/route_header.hpp"
#include "core/net/tls.hpp"
#include "core/client/vless_client.hpp"
#include "server/vless_server.hpp"
#include "target/http_target.hpp"

using namespace vlessbench;

namespace {

const asio::ip::address loopback = asio::ip::make_address("127.0.0.1");

struct stack {
  asio::io_context io;
  runtime rt;
  target::target_context target_ctx{rt.log, rt.routes, rt.connections, rt.stopping, [this] { return rt.cfg->limits; },
                                    rt.hub};
  std::shared_ptr<asio::ssl::context> tls =
      std::make_shared<asio::ssl::context>(tls::make_server_context(tls_config{}));
  std::shared_ptr<listener_runtime> vless_listener = std::make_shared<listener_runtime>();
  std::shared_ptr<listener_runtime> target_listener = std::make_shared<listener_runtime>();
  tcp::acceptor vless_acceptor{io, tcp::endpoint(loopback, 0)};
  tcp::acceptor target_acceptor{io, tcp::endpoint(loopback, 0)};
  std::filesystem::path log_path;

  stack() {
    auto cfg = std::make_shared<config>(default_config());
    cfg->users.at(0).name = "alice";
    rt.cfg = cfg;
    rt.live.publish(rt.cfg);
    vless_listener->name = "raw-tls";
    vless_listener->kind = listener_kind::vless;
    vless_listener->endpoint = vless_acceptor.local_endpoint();
    vless_listener->generation = 1;
    target_listener->name = "http";
    target_listener->kind = listener_kind::target;
    target_listener->endpoint = target_acceptor.local_endpoint();
    log_path =
        std::filesystem::temp_directory_path() / ("vlessbench-full-stack-" + std::to_string(::getpid()) + ".jsonl");
    std::filesystem::remove(log_path);
    rt.log.open(log_path.string());
  }
  ~stack() { std::filesystem::remove(log_path); }

  // The daemon's accept loops, bounded: each serves n connections and ends.
  awaitable<void> accept_vless(int n) {
    for (int i = 0; i < n; ++i) {
      tcp::endpoint peer;
      auto socket = co_await vless_acceptor.async_accept(peer, use_awaitable);
      vless_server::session_start start{
          vless_server::listener_snapshot::of(vless_listener, tls, rt.cfg), rt.next_session_id++, peer, {}};
      asio::co_spawn(io, vless_server::serve_session(rt, std::move(start), std::move(socket)), asio::detached);
    }
  }
  awaitable<void> accept_target(int n) {
    for (int i = 0; i < n; ++i) {
      tcp::endpoint peer;
      auto socket = co_await target_acceptor.async_accept(peer, use_awaitable);
      asio::co_spawn(io, target::serve_connection(target_ctx, target_listener, std::move(socket), peer),
                     asio::detached);
    }
  }

  std::string log_text() {
    REQUIRE(rt.log.flush(std::chrono::seconds(2)));
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

struct reply {
  http::response head;
  std::string raw;
};

// Reads one response (head + Content-Length body) off a VLESS client; buffer keeps what follows.
awaitable<reply> read_reply(vless::client& c, std::string& buffer) {
  char chunk[4096];
  for (int reads = 0; reads < 64; ++reads) {
    auto parsed = http::parse_response(buffer);
    if (parsed.invalid()) throw std::runtime_error(std::string(parsed.reason));
    if (parsed.complete() && buffer.size() >= parsed.consumed + parsed.value.content_length.value_or(0)) {
      const auto total = parsed.consumed + parsed.value.content_length.value_or(0);
      reply r{parsed.value, buffer.substr(0, total)};
      buffer.erase(0, total);
      co_return r;
    }
    std::size_t n = 0;
    if (auto ec = co_await c.read_some(chunk, sizeof chunk, n)) throw std::system_error(ec);
    buffer.append(chunk, n);
  }
  throw std::runtime_error("no complete response in 64 reads");
}

std::string header(const reply& r, std::string_view name) {
  auto v = r.head.find(name);
  return v ? std::string(*v) : std::string();
}

// The client's plan: to the stack's VLESS listener, for its target, as user uuid.
vless::client_plan plan_for(const stack& s, const uuid_bytes& uuid) {
  tls::client_options opts;
  opts.sni = "localhost";
  return vless::make_client_plan(s.vless_acceptor.local_endpoint(), opts,
                                 vless::tcp_request(uuid, "127.0.0.1", s.target_acceptor.local_endpoint().port()));
}

// TCP connect and the transport's opening (TLS, and an upgrade where the plan has one).
awaitable<void> open_tunnel(vless::client& c) {
  if (auto ec = co_await c.connect()) throw std::system_error(ec);
  if (auto ec = co_await c.handshake()) throw std::system_error(ec);
}

// One request through the tunnel and its response.
awaitable<reply> exchange(vless::client& c, std::string_view request, std::string& buffer) {
  if (auto ec = co_await c.write(request)) throw std::system_error(ec);
  co_return co_await read_reply(c, buffer);
}

// A completion handler that keeps the client coroutine's exception text for the test to report.
auto keep_failure(std::string& failure) {
  return [&failure](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      failure = ex.what();
    }
  };
}

}  // namespace

TEST_CASE("full stack: a request through the VLESS session proves its route and phases", "[full_stack][route]") {
  stack s;
  const auto plan = plan_for(s, s.rt.cfg->users.at(0).uuid);
  std::vector<reply> tunnelled;
  std::optional<reply> direct;
  std::string failure;

  asio::co_spawn(s.io, s.accept_vless(1), asio::detached);
  asio::co_spawn(s.io, s.accept_target(2), asio::detached);
  asio::co_spawn(
      s.io,
      [&]() -> awaitable<void> {
        // A new VLESS session and two requests on it (the second one reuses the tunnel).
        tcp::socket socket(s.io);
        vless::client c(socket, plan);
        co_await open_tunnel(c);
        std::string buffer;
        tunnelled.push_back(
            co_await exchange(c, "GET /generate_204 HTTP/1.1\r\nHost: t\r\nX-Vlessbench-Seq: 1\r\n\r\n", buffer));
        tunnelled.push_back(co_await exchange(
            c, "GET /bytes/10 HTTP/1.1\r\nHost: t\r\nX-Vlessbench-Seq: 2\r\nConnection: close\r\n\r\n", buffer));
        socket.close();

        // The same target, straight from the client: no session in between.
        tcp::socket plain(s.io);
        co_await plain.async_connect(s.target_acceptor.local_endpoint(), use_awaitable);
        const std::string_view req = "GET /generate_204 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        co_await asio::async_write(plain, asio::buffer(req), use_awaitable);
        std::string got;
        char chunk[4096];
        for (int reads = 0; reads < 64; ++reads) {
          auto [ec, n] = co_await plain.async_read_some(asio::buffer(chunk), as_tuple_awaitable);
          if (ec) break;
          got.append(chunk, n);
        }
        auto parsed = http::parse_response(got);
        if (!parsed.complete()) throw std::runtime_error("direct reply incomplete");
        direct = reply{parsed.value, got};
      },
      keep_failure(failure));
  s.io.run_for(std::chrono::seconds(10));

  INFO(failure);
  REQUIRE(failure.empty());
  REQUIRE(tunnelled.size() == 2);
  REQUIRE(direct);

  // Route proof: both requests name the same session and its user; the direct one says direct.
  const auto first = parse_route_header(header(tunnelled[0], "X-Vlessbench-Route"));
  const auto second = parse_route_header(header(tunnelled[1], "X-Vlessbench-Route"));
  CHECK(tunnelled[0].head.status == 204);
  CHECK(tunnelled[1].head.status == 200);
  CHECK(tunnelled[1].raw.ends_with("\r\n\r\nabcdefghij"));
  CHECK(first.kind == route_kind::vless);
  REQUIRE(first.session);
  CHECK(*first.session == 1);
  CHECK(first.user == "alice");
  CHECK(second.kind == route_kind::vless);
  CHECK(second.session == first.session);
  CHECK(parse_route_header(header(*direct, "X-Vlessbench-Route")).kind == route_kind::direct);
  CHECK(!direct->head.find("Server-Timing"));

  // Phases: the session's handshake, header and upstream connect, each measured and non-negative,
  // and the listener's ACK policy named.
  const auto phases = parse_server_timing(header(tunnelled[0], "Server-Timing"));
  REQUIRE(phases.tls);
  REQUIRE(phases.vless);
  REQUIRE(phases.upstream);
  CHECK(*phases.tls >= 0.0);
  CHECK(*phases.vless >= 0.0);
  CHECK(*phases.upstream >= 0.0);
  CHECK(phases.ack == std::optional<std::string>(std::string(to_string(s.vless_listener->tcp.load().quickack))));
  // The VLESS client's JA4 (core/wire/ja4.hpp), recorded by the server context's ClientHello callback:
  // the built-in client offers TLS 1.3 and http/1.1.
  REQUIRE(phases.ja4);
  CHECK(std::regex_match(*phases.ja4, std::regex("t13[di][0-9]{4}h1_[0-9a-f]{12}_[0-9a-f]{12}")));

  // The log: the session once, with its user and the client's TLS facts; both tunnelled requests
  // carry its id; the direct one says direct; nothing is left registered.
  const auto log = s.log_text();
  CHECK(log.find("{\"event\":\"vless.session\"") != std::string::npos);
  CHECK(log.find("\"session\":1,\"listener\":\"raw-tls\",\"user\":\"alice\"") != std::string::npos);
  CHECK(log.find("\"tls_version\":\"TLSv1.3\"") != std::string::npos);
  if (phases.ja4) CHECK(log.find("\"ja4\":\"" + *phases.ja4 + "\"") != std::string::npos);
  std::size_t vless_requests = 0;
  for (std::size_t at = 0;
       (at = log.find("\"route\":\"vless\",\"vless_session\":1,\"vless_user\":\"alice\"", at)) != std::string::npos;
       ++at)
    ++vless_requests;
  CHECK(vless_requests == 2);
  CHECK(log.find("\"route\":\"direct\"") != std::string::npos);
  CHECK(s.rt.routes.size() == 0);
}

TEST_CASE("full stack: a wrong user is refused before any upstream connection", "[full_stack][admission]") {
  stack s;
  auto uuid = s.rt.cfg->users.at(0).uuid;
  uuid[0] ^= 0xff;  // nobody's
  const auto plan = plan_for(s, uuid);
  std::error_code read_error;
  asio::co_spawn(s.io, s.accept_vless(1), asio::detached);
  asio::co_spawn(
      s.io,
      [&]() -> awaitable<void> {
        tcp::socket socket(s.io);
        vless::client c(socket, plan);
        co_await c.connect();
        co_await c.handshake();
        co_await c.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        char chunk[256];
        std::size_t n = 0;
        read_error = co_await c.read_some(chunk, sizeof chunk, n);
      },
      asio::detached);
  s.io.run_for(std::chrono::seconds(10));

  CHECK(read_error);  // closed without a response header
  const auto log = s.log_text();
  CHECK(log.find("{\"event\":\"vless.reject\"") != std::string::npos);
  CHECK(log.find("\"reason\":\"unknown_user\"") != std::string::npos);
  CHECK(log.find("\"event\":\"http.request\"") == std::string::npos);
}

TEST_CASE("full stack: WebSocket with early data and HTTPUpgrade name their transport", "[full_stack][route][ws]") {
  // The embedded default's listeners of those names carry the transports (core/config/config.cpp).
  for (const std::string listener : {"ws", "httpupgrade"}) {
    stack s;
    s.vless_listener->name = listener;
    // The listener's runtime carries its transport, as the daemon's accept loop copies it.
    for (const auto& v : s.rt.cfg->vless)
      if (v.name == listener) s.vless_listener->transport = v.transport;
    REQUIRE(s.vless_listener->transport.kind == (listener == "ws" ? transport_kind::ws : transport_kind::httpupgrade));
    auto plan = plan_for(s, s.rt.cfg->users.at(0).uuid);
    plan.transport.kind = listener == "ws" ? transport_kind::ws : transport_kind::httpupgrade;
    plan.transport.path = listener == "ws" ? "/ws" : "/up";
    plan.transport.max_early_data = listener == "ws" ? 2048 : 0;
    std::optional<reply> got;
    std::string failure;
    asio::co_spawn(s.io, s.accept_vless(1), asio::detached);
    asio::co_spawn(s.io, s.accept_target(1), asio::detached);
    asio::co_spawn(
        s.io,
        [&]() -> awaitable<void> {
          tcp::socket socket(s.io);
          vless::client c(socket, plan);
          co_await open_tunnel(c);
          std::string buffer;
          got = co_await exchange(c, "GET /bytes/10 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", buffer);
          socket.close();
        },
        keep_failure(failure));
    s.io.run_for(std::chrono::seconds(10));
    INFO(listener << ": " << failure);
    REQUIRE(failure.empty());
    REQUIRE(got);
    CHECK(got->raw.ends_with("\r\n\r\nabcdefghij"));
    const auto route = parse_route_header(header(*got, "X-Vlessbench-Route"));
    CHECK(route.kind == route_kind::vless);
    CHECK(route.user == "alice");
    CHECK(route.transport == (listener == "ws" ? "ws" : "httpupgrade"));
    const auto phases = parse_server_timing(header(*got, "Server-Timing"));
    REQUIRE(phases.tls);
    REQUIRE(phases.upgrade);
    REQUIRE(phases.vless);
    const auto log = s.log_text();
    CHECK(log.find("\"transport\":\"" + std::string(to_string(plan.transport.kind)) + "\"") != std::string::npos);
    // ws with ed=2048: the VLESS header and the GET came in the upgrade request.
    if (listener == "ws") CHECK(log.find("\"early_data\":0") == std::string::npos);
    CHECK(log.find("\"upgrade_done\":") != std::string::npos);
    CHECK(s.rt.routes.size() == 0);
  }
  // Raw TLS keeps its line: no transport item, and the parse says tls.
  route_info raw;
  raw.session_id = 7;
  raw.user = "u";
  raw.transport = "tls";
  CHECK(format_route_header(&raw) == "vless session=7 user=u");
  CHECK(parse_route_header(format_route_header(&raw)).transport == "tls");
  raw.transport = "ws";
  CHECK(parse_route_header(format_route_header(&raw)).transport == "ws");
}
