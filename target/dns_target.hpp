#pragma once
// The [[dns]] responder (docs/target.md): answers A/AAAA for its zone (default
// vlessbench.test) over UDP and TCP on one port, so a user can time name
// resolution as their client does it (through VLESS UDP, or the client's own
// DNS). Pure rules in core/wire/dns_message.hpp; this file is the I/O. Each query is
// one `dns.query` line naming its route (route registry, as the HTTP and UDP
// echo targets do).
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/wire/dns_message.hpp"
#include "target/dns_rrl.hpp"
#include "target/target_context.hpp"
#include "target/udp_refusals.hpp"

namespace vlessbench::target {

class dns_responder : public std::enable_shared_from_this<dns_responder> {
 public:
  // Delayed answers (`NAME.delay-MS.zone`) waiting at once; beyond, SERVFAIL at
  // once.
  static constexpr std::size_t max_delayed = 256;
  // TCP connections at once; beyond, a new one is closed at accept.
  static constexpr std::size_t max_connections = 256;
  // A TCP connection with no query for this long is closed (RFC 7766 asks for
  // seconds, not minutes).
  static constexpr std::chrono::seconds tcp_idle{10};

  // Both sockets bound already (the daemon binds, so a failure names the
  // listener at start).
  dns_responder(target_context& ctx, std::string name, dns::zone_rules zone, asio::ip::udp::socket udp_socket,
                tcp::acceptor acceptor);
  void start();
  void stop();  // closes both sockets, open connections and waiting answers
  const std::string& name() const { return name_; }
  // A reload that keeps the endpoint: the next query is answered by the new zone rules (one
  // already waiting on its delay keeps the answer it was given).
  void update(std::string name, dns::zone_rules zone) {
    name_ = std::move(name);
    zone_ = std::move(zone);
  }
  tcp::endpoint endpoint() const { return local_; }
  // The UDP socket's bound endpoint: the same address and port as the TCP one.
  asio::ip::udp::endpoint own_udp() const { return {local_.address(), local_.port()}; }

  // One message's answer and what the log says of it.
  struct outcome {
    std::string response;
    std::uint32_t delay_ms = 0;
    std::string name;
    std::uint16_t qtype = 0;
    dns::rcode rc = dns::rcode::noerror;
    std::string_view error;  // the parser's reason (FORMERR), or "too_many_delayed"
    bool answer = true;      // false: nothing is sent (a message under 2 bytes has no id)
  };

 private:
  // route: the relaying session, or nullptr (direct); named in the response's
  // route TXT record (dns::format_route_txt).
  // local: the address the query arrived on (the zone's A/AAAA when they are not configured).
  outcome answer(std::string_view message, const route_info* route, const asio::ip::address& local) const;
  void log(const outcome& o, std::string_view transport, const tcp::endpoint& peer, const route_info* route) const;
  awaitable<void> serve_udp();
  awaitable<void> answer_later(outcome o, asio::ip::udp::endpoint peer, asio::ip::udp::endpoint local,
                               std::shared_ptr<const route_info> route);
  awaitable<void> serve_tcp();
  awaitable<void> serve_connection(tcp::socket socket, tcp::endpoint peer);

  // Response rate limiting of UDP answers (target/dns_rrl.hpp): sources that are neither loopback,
  // the address the query was sent to, nor a VLESS session's relay socket. Judged before the answer is built, so a
  // limited query writes no dns.query line; each period with limited answers is one dns.rrl line.
  rrl_action rate_limit(const asio::ip::udp::endpoint& peer);
  void flush_rrl(std::chrono::steady_clock::time_point now);
  awaitable<void> rrl_report();
  response_rate_limiter rrl_;
  struct rrl_period {
    std::chrono::steady_clock::time_point start{};
    std::uint64_t answered = 0, slipped = 0, dropped = 0;
    std::set<std::string> prefixes;  // limited in the period, at most max_reported_prefixes
    std::string last_prefix;
  } rrl_period_;
  static constexpr std::size_t max_reported_prefixes = 4096;
  std::unique_ptr<asio::steady_timer> rrl_timer_;

  target_context& ctx_;
  std::string name_;
  dns::zone_rules zone_;
  asio::ip::udp::socket udp_;
  tcp::acceptor tcp_;
  tcp::endpoint local_;
  // Datagrams not answered (core/runtime/udp_guard.hpp): /metrics, udp.refused, the human log.
  std::shared_ptr<udp_refusals> refusals_;
  std::size_t delayed_ = 0;
  std::set<asio::steady_timer*> timers_;  // delayed UDP answers waiting
  std::set<tcp::socket*> connections_;
  bool stopped_ = false;
};

}  // namespace vlessbench::target
