// The one upstream dialer (server/upstream_dialer.hpp): policy before connect. resolve() checks
// every address of a destination against [destinations] and the daemon's own [[vless]] listeners;
// a refused one never reaches connect(), which takes only what resolve() returned. An allowed
// destination is connected on loopback and its identity registered in the route registry before
// the caller sends a byte, for TCP and UDP alike.
#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <asio/ip/udp.hpp>

#include "core/config/config.hpp"
#include "core/net/asio_compat.hpp"
#include "core/net/socket_policy.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/wire/destination.hpp"
#include "server/runtime.hpp"
#include "server/upstream_dialer.hpp"

using namespace vlessbench;
using vless_server::detail::allowed_endpoints;
using vless_server::detail::dial_failure;
using vless_server::detail::dial_result;
using vless_server::detail::upstream_dialer;

namespace {

const asio::ip::address loopback = asio::ip::make_address("127.0.0.1");

// A daemon's runtime with the default config plus a [[vless]] listener on `own` (a port of
// loopback that the test holds open), published as the live config the dialer checks against.
struct fixture {
  asio::io_context io;
  runtime rt;
  upstream_dialer dialer{rt, io.get_executor()};

  explicit fixture(std::optional<tcp::endpoint> own = std::nullopt) {
    auto cfg = std::make_shared<config>(default_config());
    if (own) {
      auto listener = cfg->vless.front();
      listener.name = "own";
      listener.listen = *own;
      cfg->vless.push_back(listener);
    }
    rt.cfg = cfg;
    rt.live.publish(rt.cfg);
  }

  // Runs one coroutine to its end, bounded (5 s), and rethrows what it threw.
  void run(const std::function<awaitable<void>()>& body) {
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
      error = e;
      done = true;
    });
    io.run_for(std::chrono::seconds(5));
    io.restart();
    if (error) std::rethrow_exception(error);
    REQUIRE(done);
  }

  dial_result<allowed_endpoints> resolve(const destination& d) {
    dial_result<allowed_endpoints> out;
    run([&]() -> awaitable<void> { out = co_await dialer.resolve(d); });
    return out;
  }
};

// True when a connection is waiting in the acceptor's queue (a connect reached it).
bool connection_waiting(tcp::acceptor& acceptor) {
  acceptor.non_blocking(true);
  std::error_code ec;
  tcp::socket s = acceptor.accept(ec);
  return !ec;
}

}  // namespace

TEST_CASE("the dialer refuses a destination the policy forbids before any connect", "[dialer]") {
  asio::io_context own_io;
  tcp::acceptor own(own_io, tcp::endpoint(loopback, 0));  // stands for one of the daemon's [[vless]] ports
  const auto own_port = own.local_endpoint().port();
  fixture f(own.local_endpoint());

  SECTION("one of the daemon's own [[vless]] listeners") {
    const auto r = f.resolve(destination_of(loopback, own_port, network::tcp));
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure.at == dial_failure::step::policy);
    CHECK(r.failure.reason == "dest_is_vless_listener");
    CHECK(r.failure.detail == "127.0.0.1:" + std::to_string(own_port));
  }
  SECTION("a name whose addresses include a forbidden one (every address is checked)") {
    const auto r = f.resolve(destination_for_host("localhost", own_port));
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure.at == dial_failure::step::policy);
    CHECK(r.failure.reason == "dest_is_vless_listener");
  }
  SECTION("an address outside [destinations]") {
    const auto r = f.resolve(destination_of(asio::ip::make_address("192.0.2.1"), 80, network::tcp));
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure.at == dial_failure::step::policy);
    CHECK(r.failure.reason == "dest_not_allowed");
    CHECK(r.failure.detail == "192.0.2.1:80");
  }
  SECTION("a destination that is no address") {
    destination bad = destination_of(loopback, own_port, network::tcp);
    bad.address = "abc";  // neither 4 nor 16 bytes
    const auto r = f.resolve(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.failure.at == dial_failure::step::resolve);
    CHECK(r.failure.reason == "resolve_failed");
  }
  // Nothing was dialled: no connection reached the listener, no dial was in flight or registered.
  CHECK_FALSE(connection_waiting(own));
  CHECK(f.rt.routes.dials_in_flight() == 0);
  CHECK(f.rt.routes.size() == 0);
}

TEST_CASE("the dialer connects an allowed TCP destination and registers its route", "[dialer]") {
  fixture f;
  tcp::acceptor target(f.io, tcp::endpoint(loopback, 0));
  const auto target_ep = target.local_endpoint();

  const auto r = f.resolve(destination_of(loopback, target_ep.port(), network::tcp));
  REQUIRE(r.ok());
  REQUIRE(r.value->endpoints().size() == 1);
  CHECK(r.value->endpoints().front() == target_ep);

  tcp::socket sock(f.io);
  const shared_tcp_policy policy(tcp_policy{true, quickack_mode::on});
  tcp_policy applied{false, quickack_mode::kernel};
  auto info = std::make_shared<route_info>();
  info->session_id = 7;
  info->user = "alice";
  std::optional<route_registration> reg;
  std::optional<dial_failure> failed;
  f.run([&]() -> awaitable<void> {
    failed = co_await f.dialer.connect(sock, *r.value, policy, applied, info, reg, [] { return false; });
  });
  REQUIRE_FALSE(failed);
  CHECK(applied == tcp_policy{true, quickack_mode::on});
  REQUIRE(reg);
  CHECK(reg->owned());

  // The target's view of the accepted connection, (peer, local), names the session.
  tcp::endpoint peer;
  tcp::socket accepted = target.accept(peer);
  CHECK(peer == sock.local_endpoint());
  const auto found = f.rt.routes.find(flow_id::tcp(peer, accepted.local_endpoint()));
  REQUIRE(found);
  CHECK(found->session_id == 7);
  CHECK(found->user == "alice");
  CHECK(f.rt.routes.dials_in_flight() == 0);

  reg.reset();  // the session ends: its entry goes
  CHECK(f.rt.routes.size() == 0);
}

TEST_CASE("the dialer reports a refused connect at the connect step and registers nothing", "[dialer]") {
  fixture f;
  tcp::endpoint closed;
  {
    tcp::acceptor gone(f.io, tcp::endpoint(loopback, 0));
    closed = gone.local_endpoint();
  }  // nobody listens there now
  const auto r = f.resolve(destination_of(loopback, closed.port(), network::tcp));
  REQUIRE(r.ok());
  tcp::socket sock(f.io);
  const shared_tcp_policy policy;
  tcp_policy applied;
  std::optional<route_registration> reg;
  std::optional<dial_failure> failed;
  f.run([&]() -> awaitable<void> {
    failed = co_await f.dialer.connect(sock, *r.value, policy, applied, std::make_shared<route_info>(), reg,
                                       [] { return false; });
  });
  REQUIRE(failed);
  CHECK(failed->at == dial_failure::step::connect);
  CHECK(failed->reason == "connect_failed");
  CHECK_FALSE(reg);
  CHECK(f.rt.routes.size() == 0);
  CHECK(f.rt.routes.dials_in_flight() == 0);
}

TEST_CASE("the dialer connects an allowed UDP destination and registers its route", "[dialer]") {
  fixture f;
  asio::ip::udp::socket target(f.io, asio::ip::udp::endpoint(loopback, 0));
  const auto target_ep = target.local_endpoint();

  const auto r = f.resolve(destination_of(loopback, target_ep.port(), network::udp));
  REQUIRE(r.ok());
  asio::ip::udp::socket sock(f.io);
  auto info = std::make_shared<route_info>();
  info->session_id = 9;
  std::optional<route_registration> reg;
  asio::ip::udp::endpoint remote;
  const auto failed = f.dialer.connect(sock, *r.value, info, reg, remote);
  REQUIRE_FALSE(failed);
  CHECK(remote == target_ep);
  REQUIRE(reg);
  CHECK(reg->owned());
  // A datagram's receiver sees (source, own): the target's lookup of it names the session.
  const auto found = f.rt.routes.find(flow_id::udp(sock.local_endpoint(), target_ep));
  REQUIRE(found);
  CHECK(found->session_id == 9);
}
