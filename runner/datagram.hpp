#pragma once
// One UDP flow of one path, for udp:// and dns:// targets (docs/runner.md "UDP and DNS
// targets"): a connected UDP socket (direct), a SOCKS5 UDP ASSOCIATE (the TCP control connection
// stays open for the flow's life; datagrams carry the RFC 1928 header, core/wire/socks5_udp.hpp), or a
// VLESS command 2 session of the built-in client over any of its transports (datagrams framed as
// u16 length + bytes, core/wire/udp_framing.hpp), or, with mux=on / packetEncoding=xudp, a UDP (or
// XUDP) sub-connection of the client's Mux.Cool (runner/mux_tunnel.hpp). A sample is one
// datagram's round trip on it.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/net/asio_compat.hpp"
#include "core/client/vless_client.hpp"
#include "runner/failure.hpp"
#include "runner/op_deadline.hpp"
#include "runner/tunnel.hpp"

namespace vlessbench::runner {

class datagram_tunnel : public std::enable_shared_from_this<datagram_tunnel> {
 public:
  using clock = std::chrono::steady_clock;
  // Whether a reply belongs to the datagram just sent (an echo of it, a DNS answer with its id).
  // Replies that do not (a late answer to an earlier, timed-out sample) are skipped.
  using matcher = std::function<bool(std::string_view reply)>;

  // plan: make_plan() for a udp:// or dns:// target (its VLESS header has the UDP command).
  datagram_tunnel(asio::any_io_executor ex, const path_plan& plan, std::chrono::milliseconds timeout);
  ~datagram_tunnel();  // a mux sub still open gets its End queued on its connection
  datagram_tunnel(const datagram_tunnel&) = delete;
  datagram_tunnel& operator=(const datagram_tunnel&) = delete;

  // As tunnel::arm/disarm: the watchdog for the operations that follow (it closes the sockets).
  void arm();
  void disarm();

  // Before the clock, after arm(): on a mux=on path, the shared mux connection (made or remade
  // here) and its queued End frames. Nothing on other paths, for a new flow under
  // muxnew=connection, or under packetEncoding=xudp alone (the flow's own connection is part of
  // what open() measures).
  awaitable<maybe_failure> prepare(bool new_flow);
  // The path's setup: a UDP socket connected to the target; SOCKS5 greeting + UDP ASSOCIATE and
  // a UDP socket connected to the relay; or TCP connect + TLS (+ upgrade) of the VLESS client,
  // whose header then goes with the first datagram. On a mux path after prepare() nothing: the
  // sub's New frame goes with the first datagram (else the flow's own mux connection first).
  awaitable<maybe_failure> open();
  // Sends one datagram and waits for the reply mine() accepts; reply receives its payload.
  awaitable<maybe_failure> round_trip(std::string_view datagram, const matcher& mine, std::string& reply);

  bool reusable() const { return open_ && reusable_ && (!mux_ || mux_->usable()); }
  // A direct path's UDP socket address ("127.0.0.1:40006": the peer the target logs); empty for
  // other paths or a socket that is not open.
  std::string direct_flow() const;
  void close();

 private:
  void touch(const char* phase);
  std::string describe(const std::error_code& ec) const;
  awaitable<maybe_failure> open_socks5();
  awaitable<maybe_failure> mux_connect();  // mux_: TCP, TLS, (header alone)
  awaitable<std::error_code> send(std::string_view datagram);
  // The next datagram from the far side (its payload: SOCKS5 header and VLESS length removed).
  awaitable<maybe_failure> receive(std::string& out);

  const path_plan& plan_;
  tcp::socket tcp_;            // SOCKS5 control connection, or the VLESS client's connection
  asio::ip::udp::socket udp_;  // direct and SOCKS5
  std::optional<vless::client> vless_;
  op_deadline deadline_;
  bool open_ = false;
  bool reusable_ = true;
  std::string stream_;  // VLESS: bytes read, not yet a whole packet
  std::string scratch_;
  std::string frame_;                     // the framed datagram being sent
  std::shared_ptr<mux::connection> mux_;  // mux paths: the connection this flow's sub is on
  bool owns_mux_ = false;                 // its own (muxnew=connection, xudp alone): closed with it
  bool sub_open_ = false;                 // the New frame went out: sub_ is ours to End
  std::uint16_t sub_ = 0;
  mux::packet packet_;
};

}  // namespace vlessbench::runner
