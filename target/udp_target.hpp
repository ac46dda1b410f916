#pragma once
// The [[udp_target]] (docs/target.md): a UDP echo server that proves each
// datagram's route. Every datagram comes back with a trailer
// (core/wire/route_header.hpp, format_udp_echo) naming the listener and `vless
// session=ID user=NAME` when its source address and port are those of a live
// VLESS UDP session's upstream socket (the route registry, as TCP upstreams),
// or `direct`. Logged as one `udp.packet` line per flow (source address): never
// a line per datagram.
// In mode "ntp" or "stun" ([[udp_target]] mode, docs/target.md) it answers as an NTP server (mode 4,
// the daemon's clock; core/wire/ntp_message.hpp) or a STUN server (Binding success with
// XOR-MAPPED-ADDRESS and SOFTWARE naming the route; core/wire/stun_message.hpp) instead, for the
// UDP delay tests clients ship; the same flow lines prove the route. A direct source's answer is
// never longer than its request, and direct sources are rate limited per prefix as the DNS
// responder's answers are (target/dns_rrl.hpp, [limits] dns_rrl_*); a limited request is dropped.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/config/config.hpp"
#include "core/net/asio_compat.hpp"
#include "target/dns_rrl.hpp"
#include "target/target_context.hpp"
#include "target/udp_refusals.hpp"

namespace vlessbench::target {

class udp_echo_target : public std::enable_shared_from_this<udp_echo_target> {
 public:
  // Flows tracked at once; beyond, the longest idle one is logged and forgotten
  // ("evicted").
  static constexpr std::size_t max_flows = 4096;

  // socket: bound already (the daemon binds, so a failure names the listener at
  // start).
  udp_echo_target(target_context& ctx, std::string name, asio::ip::udp::socket socket, udp_mode mode = udp_mode::echo);
  void start();  // serves on the socket's executor until stop()
  void stop();   // closes the socket; every open flow is logged ("stop")
  const std::string& name() const { return name_; }
  // A reload that keeps the endpoint: flows and their routes stay, later lines carry the name.
  void rename(std::string name) { name_ = std::move(name); }
  // The same, with the mode the reload gives it (the next datagram is answered in it).
  void update(std::string name, udp_mode mode) {
    name_ = std::move(name);
    mode_ = mode;
  }
  udp_mode mode() const { return mode_; }
  asio::ip::udp::endpoint endpoint() const;

 private:
  struct flow {
    std::shared_ptr<const route_info> route;  // looked up at the flow's first datagram, kept for its life
    std::uint64_t packets_in = 0, bytes_in = 0, packets_out = 0, bytes_out = 0;
    // Datagrams too short for their trailer: answered in the short form, or not at all.
    std::uint64_t short_answers = 0, unanswered = 0;
    std::chrono::steady_clock::time_point first, last;
  };
  // A datagram's answer in mode ntp or stun: empty when it gets none, refusal then saying why (empty
  // for none at all: a STUN answer that cannot fit in a direct request's size).
  struct probe_answer {
    std::string bytes;
    std::string_view refusal;
  };
  probe_answer answer_probe(std::string_view datagram, const asio::ip::udp::endpoint& peer,
                            const asio::ip::udp::endpoint& local, const route_info* route);
  awaitable<void> serve();
  awaitable<void> sweep();
  // A flow is a source and the local address it sent to (several on a wildcard socket).
  using flow_key = std::pair<asio::ip::udp::endpoint, asio::ip::udp::endpoint>;
  flow& flow_for(const flow_key& key, std::chrono::steady_clock::time_point now);
  void log_flow(const asio::ip::udp::endpoint& peer, const flow& f, std::string_view why);

  target_context& ctx_;
  std::string name_;
  asio::ip::udp::socket socket_;
  asio::ip::udp::endpoint local_;
  asio::steady_timer sweep_timer_;
  // Datagrams not answered (core/runtime/udp_guard.hpp): /metrics, udp.refused, the human log.
  std::shared_ptr<udp_refusals> refusals_;
  std::map<flow_key, flow> flows_;
  udp_mode mode_ = udp_mode::echo;
  response_rate_limiter rrl_;  // direct sources of an ntp or stun target
  bool stopped_ = false;
};

}  // namespace vlessbench::target
