#pragma once
// VLESS command 2 (UDP) inside a session (server/vless_session.hpp;
// docs/sessions.md "UDP"): one connected UDP socket to the request's one
// destination, dialled and registered by the one dialer (server/upstream_dialer.hpp)
// as the TCP upstreams are (so the [[udp_target]] and [[dns]] targets name the
// session), and datagrams
// relayed between it and the VLESS stream, framed as core/wire/udp_framing.hpp says.
// Free templates over the session, through the operations it gives its relays
// (server/session_core.hpp).
#include <optional>
#include <string>
#include <vector>

#include "server/buffer_pool.hpp"
#include "core/log/logging.hpp"
#include "core/runtime/route_registry.hpp"
#include "core/wire/udp_framing.hpp"
#include "core/wire/vless_codec.hpp"
#include "server/relay_common.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

using udp = asio::ip::udp;

// The UDP side of a session. The route entry goes before the socket, as for TCP
// upstreams.
struct udp_upstream {
  explicit udp_upstream(const asio::any_io_executor& ex) : socket(ex) {}
  udp::socket socket;
  std::optional<route_registration> reg;
  std::uint64_t packets_up = 0;    // datagrams sent to the destination
  std::uint64_t packets_down = 0;  // datagrams relayed back to the client
  void close() {
    if (reg) reg->release();
    std::error_code ignored;
    socket.close(ignored);
  }
};

// Client -> destination: VLESS stream bytes in, one send() per complete packet.
// A length over the cap or a stream that ends inside a packet ends the session
// with that reason.
template <class Session>
awaitable<void> udp_client_to_upstream(Session& s, std::size_t pending) {
  auto& up = *s.udp_up;
  std::string acc = s.take_payload(pending);  // bounded: < one packet + one read
  for (;;) {
    std::size_t at = 0;
    for (;;) {
      const auto p = vless::parse_udp_packet(std::string_view(acc).substr(at));
      if (p.invalid()) {
        s.relay_ends(close_reason::udp_packet_too_large);
        up.close();
        co_return;
      }
      if (!p.complete()) break;
      at += p.consumed;
      s.touch();
      auto [ec, n] = co_await up.socket.async_send(asio::buffer(p.value.data(), p.value.size()), as_tuple_awaitable);
      if (ec == asio::error::connection_refused) continue;  // an ICMP error for an earlier datagram
      if (ec) {
        s.relay_ends(s.upstream_ended(close_reason::upstream_error));
        std::error_code ignored;
        s.client_socket().cancel(ignored);
        co_return;
      }
      ++up.packets_up;
      s.count_up(n);
    }
    acc.erase(0, at);
    if (s.client_reads_stopped()) co_return;
    buffer_pool::block block = buffer_pool::get();
    auto [ec, n] =
        co_await s.client.async_read_some(asio::buffer(block.get(), buffer_pool::block_size), as_tuple_awaitable);
    if (ec) {
      if (is_eof(ec) && !acc.empty())
        s.relay_ends(close_reason::udp_truncated_packet);
      else if (!is_eof(ec))
        s.relay_fails(close_reason::client_error);
      up.close();
      co_return;
    }
    acc.append(block.get(), n);
  }
}

// Destination -> client: each datagram framed and written; the response header
// leaves with the first one (or alone when the relay ends without any).
template <class Session>
awaitable<void> udp_upstream_to_client(Session& s) {
  auto& up = *s.udp_up;
  bool header_sent = false;
  constexpr std::size_t room = header_room + vless::udp_length_bytes;
  for (;;) {
    auto [ec] = co_await up.socket.async_wait(udp::socket::wait_read, as_tuple_awaitable);
    if (ec) break;
    auto block = buffer_pool::get();
    char* const down = block.get();
    const std::size_t n = up.socket.receive(asio::buffer(down + room, 65'535), 0, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again || ec == asio::error::connection_refused)
      continue;
    if (ec) {
      s.destination_ends(close_reason::upstream_error);
      break;
    }
    s.touch();
    if (s.info->phases.first_upstream_byte < 0) s.info->phases.first_upstream_byte = s.now_us();
    vless::put_udp_length(down + header_room, n);
    const char* start = down + header_room;
    std::size_t len = n + vless::udp_length_bytes;
    if (!header_sent) {
      down[0] = vless::response_header[0];
      down[1] = vless::response_header[1];
      start = down;
      len += header_room;
      s.info->phases.first_client_byte = s.now_us();
    }
    s.writing_down(true);
    auto [wec, wn] = co_await asio::async_write(s.client, asio::buffer(start, len), as_tuple_awaitable);
    s.writing_down(false);
    if (wec) {
      s.relay_ends(close_reason::client_error);
      break;
    }
    header_sent = true;
    ++up.packets_down;
    s.count_down(n);
  }
  if (!header_sent && !s.timed_out() && s.client_socket().is_open()) {
    auto [wec, wn] = co_await asio::async_write(
        s.client, asio::buffer(vless::response_header.data(), vless::response_header.size()), as_tuple_awaitable);
    (void)wec;
    (void)wn;
  }
  s.stop_client_reads();
}

}  // namespace vlessbench::vless_server::detail
