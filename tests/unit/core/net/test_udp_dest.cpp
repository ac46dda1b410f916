// core/net/udp_dest: a socket on a wildcard address learns each datagram's destination address and
// answers from it. 127.0.0.2 is one of this machine's own addresses (all of 127/8 is), so a
// datagram to it arrives on a socket bound to 0.0.0.0 or [::] without any set-up, and a client
// connected to 127.0.0.2 takes a reply only from 127.0.0.2: from 127.0.0.1 (the source the kernel
// would pick on its own) the reply is dropped.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <string>

#include "core/net/udp_dest.hpp"

using namespace vlessbench;
using udp = asio::ip::udp;

namespace {

struct exchange {
  std::error_code received, sent;
  datagram seen;
  std::string payload;
  std::string reply;  // what the connected client read back ("" when none came)
};

// The server receives one datagram and echoes it from where it arrived; the client, connected to
// `to`, sends "ping" and waits at most 1 s for the answer.
exchange run(const udp::endpoint& bind_at, const asio::ip::address& to, bool enable, bool filter = false) {
  asio::io_context io;
  udp::socket server(io, bind_at);
  if (enable) REQUIRE_FALSE(enable_destination_address(server));
  if (filter) REQUIRE_FALSE(drop_forged_local_sources(server));
  const unsigned short port = server.local_endpoint().port();
  udp::socket client(io, udp::endpoint(to.is_v4() ? udp::v4() : udp::v6(), 0));
  client.connect(udp::endpoint(to, port));
  exchange out;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        std::array<char, 64> buf{};
        out.received = co_await receive_datagram(server, server.local_endpoint(), asio::buffer(buf), out.seen);
        if (out.received) co_return;
        out.payload.assign(buf.data(), out.seen.size);
        out.sent = co_await send_datagram_from(server, server.local_endpoint(), asio::buffer(out.payload),
                                               out.seen.peer, out.seen.local);
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        co_await client.async_send(asio::buffer(std::string_view("ping")), use_awaitable);
        std::array<char, 64> buf{};
        asio::steady_timer limit(io, std::chrono::seconds(1));
        limit.async_wait([&](std::error_code ec) {
          if (!ec) client.cancel();
        });
        auto [ec, n] = co_await client.async_receive(asio::buffer(buf), as_tuple_awaitable);
        limit.cancel();
        if (!ec) out.reply.assign(buf.data(), n);
      },
      asio::detached);
  io.run_for(std::chrono::seconds(5));
  CHECK_FALSE(out.received);
  CHECK_FALSE(out.sent);
  return out;
}

}  // namespace

TEST_CASE("udp_dest: an IPv4 wildcard socket names the address a datagram was sent to and answers from it") {
  const auto to = asio::ip::make_address("127.0.0.2");
  const auto r = run(udp::endpoint(udp::v4(), 0), to, true);
  CHECK(r.payload == "ping");
  CHECK(r.seen.local.address() == to);
  CHECK(r.seen.peer.address() == asio::ip::make_address("127.0.0.1"));  // the client's source
  CHECK(r.reply == "ping");
}

TEST_CASE("udp_dest: a dual-stack [::] socket names an IPv4 destination (mapped) and answers from it") {
  const auto to = asio::ip::make_address("127.0.0.2");
  const auto r = run(udp::endpoint(udp::v6(), 0), to, true);
  REQUIRE(r.seen.local.address().is_v6());
  CHECK(r.seen.local.address().to_v6() == asio::ip::make_address_v6(asio::ip::v4_mapped, to.to_v4()));
  CHECK(r.reply == "ping");
}

TEST_CASE("udp_dest: without the option the local end is the socket's own, and the reply comes from elsewhere") {
  // The case the option exists for: 0.0.0.0 is all this socket knows, the kernel picks 127.0.0.1
  // as the reply's source, and the client connected to 127.0.0.2 never sees it.
  const auto r = run(udp::endpoint(udp::v4(), 0), asio::ip::make_address("127.0.0.2"), false);
  CHECK(r.payload == "ping");
  CHECK(r.seen.local.address().is_unspecified());
  CHECK(r.reply.empty());
}

TEST_CASE("udp_dest: a socket bound to one address names it and answers from it") {
  const auto at = asio::ip::make_address("127.0.0.1");
  const auto r = run(udp::endpoint(at, 0), at, true);
  CHECK(r.seen.local.address() == at);
  CHECK(r.reply == "ping");
}

TEST_CASE("udp_dest: the forged-local-source filter keeps datagrams over lo, source = destination included") {
  // The drop side needs a datagram from an interface: tests/integration/test_udp_forged.py (veth).
  const auto at = asio::ip::make_address("127.0.0.1");
  const auto r = run(udp::endpoint(udp::v4(), 0), at, true, true);
  CHECK(r.seen.peer.address() == at);  // source = destination, over lo
  CHECK(r.reply == "ping");
  const auto v6 = run(udp::endpoint(udp::v6(), 0), asio::ip::make_address("127.0.0.2"), true, true);
  CHECK(v6.reply == "ping");  // an IPv4 datagram on a dual-stack socket
  const auto lo6 = asio::ip::make_address("::1");
  const auto r6 = run(udp::endpoint(udp::v6(), 0), lo6, true, true);
  CHECK(r6.seen.peer.address() == lo6);  // IPv6, source = destination
  CHECK(r6.reply == "ping");
}
