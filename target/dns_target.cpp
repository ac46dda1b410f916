#include "target/dns_target.hpp"

#include <vector>

#include "core/log/access_events.hpp"
#include "core/net/udp_dest.hpp"
#include "core/runtime/udp_guard.hpp"
#include "core/log/logging.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/route_header.hpp"
#include "core/wire/udp_framing.hpp"
#include "core/net/watchdog.hpp"

namespace vlessbench::target {

using udp = asio::ip::udp;

namespace {
void log_exception(const std::string& name, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("dns {}: unexpected exception: {}", name, ex.what());
  }
}
}  // namespace

dns_responder::dns_responder(target_context& ctx, std::string name, dns::zone_rules zone, udp::socket udp_socket,
                             tcp::acceptor acceptor)
    : ctx_(ctx),
      name_(std::move(name)),
      zone_(std::move(zone)),
      udp_(std::move(udp_socket)),
      tcp_(std::move(acceptor)),
      refusals_(std::make_shared<udp_refusals>(ctx, udp_.get_executor(), "dns")) {
  rrl_timer_ = std::make_unique<asio::steady_timer>(udp_.get_executor());
  rrl_period_.start = std::chrono::steady_clock::now();
  std::error_code ec;
  local_ = tcp_.local_endpoint(ec);
  if (const auto err = enable_destination_address(udp_))
    spdlog::warn("dns {}: no destination addresses ({}): UDP routes on {} read direct", name_, err.message(),
                 local_.address().to_string());
  // A query forged with a relay socket's address would be answered into its session as relayed.
  if (const auto err = drop_forged_local_sources(udp_))
    spdlog::warn("dns {}: no filter for forged local sources ({})", name_, err.message());
}

void dns_responder::start() {
  auto self = shared_from_this();
  asio::co_spawn(udp_.get_executor(), serve_udp(), [self](std::exception_ptr e) { log_exception(self->name_, e); });
  asio::co_spawn(udp_.get_executor(), serve_tcp(), [self](std::exception_ptr e) { log_exception(self->name_, e); });
  asio::co_spawn(udp_.get_executor(), rrl_report(), [self](std::exception_ptr e) { log_exception(self->name_, e); });
}

void dns_responder::stop() {
  if (stopped_) return;
  stopped_ = true;
  std::error_code ignored;
  udp_.close(ignored);
  tcp_.close(ignored);
  refusals_->stop();
  for (auto* t : timers_) t->cancel();
  for (auto* s : connections_) s->close(ignored);
  rrl_timer_->cancel();
  flush_rrl(std::chrono::steady_clock::now());
}

rrl_action dns_responder::rate_limit(const udp::endpoint& peer) {
  const limits_config l = ctx_.limits();
  const rrl_settings s{
      .responses_per_second = l.dns_rrl_responses_per_second, .slip = l.dns_rrl_slip, .window = l.dns_rrl_window};
  return rrl_.check(peer.address(), s, std::chrono::steady_clock::now());
}

void dns_responder::flush_rrl(std::chrono::steady_clock::time_point now) {
  rrl_period& p = rrl_period_;
  if (p.slipped + p.dropped > 0)
    ctx_.log.write(format_event(
        dns_rrl_event{.listener = name_,
                      .period_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.start).count(),
                      .answered = p.answered,
                      .slipped = p.slipped,
                      .dropped = p.dropped,
                      .prefixes = p.prefixes.size(),
                      .last_prefix = p.last_prefix}));
  p = rrl_period{};
  p.start = now;
}

// One dns.rrl line a second at most, for a second in which answers were limited.
awaitable<void> dns_responder::rrl_report() {
  while (!stopped_) {
    rrl_timer_->expires_after(std::chrono::seconds(1));
    auto [ec] = co_await rrl_timer_->async_wait(as_tuple_awaitable);
    if (stopped_ || ec == asio::error::operation_aborted) co_return;
    flush_rrl(std::chrono::steady_clock::now());
  }
}

dns_responder::outcome dns_responder::answer(std::string_view message, const route_info* route,
                                             const asio::ip::address& local) const {
  outcome o;
  const auto q = dns::parse_query(message);
  if (!q.complete()) {
    o.rc = dns::rcode::formerr;
    o.error = q.reason;
    const auto id = dns::message_id(message);
    o.answer = id.has_value();
    if (id) o.response = dns::build_response(*id, false, nullptr, dns::rcode::formerr);
    return o;
  }
  o.name = q.value.q.name;
  o.qtype = q.value.q.qtype;
  dns::zone_rules rules = zone_;
  const auto arrived = unmapped(local);
  if (rules.v4_from_arrival && arrived.is_v4() && !arrived.is_unspecified()) rules.v4 = arrived.to_v4().to_bytes();
  if (rules.v6_from_arrival && arrived.is_v6() && !arrived.is_unspecified()) rules.v6 = arrived.to_v6().to_bytes();
  const auto z = dns::answer_in_zone(rules, q.value.q);
  o.rc = z.rc;
  o.delay_ms = z.delay_ms;
  try {
    o.response = dns::build_response(q.value.id, q.value.recursion_desired, &q.value.q, z.rc, z.answers, 60,
                                     dns::format_route_txt(name_, format_route_header(route)));
  } catch (const std::exception& e) {
    // Not reached by any query the parser accepts (fuzz target dns_query): if
    // it were, one query must not end the responder.
    o.rc = dns::rcode::servfail;
    o.delay_ms = 0;
    o.error = "cannot_answer";
    o.response = dns::build_response(q.value.id, false, nullptr, o.rc);
  }
  return o;
}

void dns_responder::log(const outcome& o, std::string_view transport, const tcp::endpoint& peer,
                        const route_info* route) const {
  const std::string peer_text = format_endpoint(peer);
  ctx_.events().emit(dns_query_event{.listener = name_,
                                     .peer = peer_text,
                                     .transport = transport,
                                     .route = route,
                                     .name = o.name,
                                     .qtype = o.qtype,
                                     .rcode = dns::to_string(o.rc),
                                     .delay_ms = o.delay_ms,
                                     .error = o.error},
                     {.bytes_down = o.answer ? o.response.size() : 0});
}

awaitable<void> dns_responder::serve_udp() {
  std::vector<char> buf(65'535);
  datagram d;
  while (!stopped_) {
    const auto rec = co_await receive_datagram(udp_, own_udp(), asio::buffer(buf), d);
    const std::size_t n = d.size;
    const udp::endpoint& peer = d.peer;
    const udp::endpoint& local = d.local;
    if (stopped_ || rec == asio::error::operation_aborted || rec == asio::error::bad_descriptor) co_return;
    if (rec) continue;
    // Loops from one spoofed datagram (core/runtime/udp_guard.hpp): a response (QR set) is never
    // answered, not even with FORMERR; nor a reflector port or the daemon's own listeners.
    const std::string_view message(buf.data(), n);
    std::string_view refusal = udp_source_refusal(peer, local, ctx_.own_udp_ports());
    if (refusal.empty() && is_dns_response(message)) refusal = "dns_response";
    if (!refusal.empty()) {
      refusals_->note(name_, refusal, peer);
      continue;
    }
    auto route = ctx_.routes.find(flow_id::udp(peer, local));
    // Response rate limiting (target/dns_rrl.hpp) for what a forged source could reflect: not a
    // VLESS session's relay (its client is authenticated), nor a loopback source or one equal to
    // the address the query was sent to (this machine itself: Linux drops both when they arrive
    // from the network, accept_local=0 and route_localnet=0).
    const auto source = unmapped(peer.address());
    if (!route && !source.is_loopback() && source != unmapped(local.address())) {
      rrl_action act = rate_limit(peer);
      std::string truncated;
      if (act == rrl_action::slip) {
        const auto q = dns::parse_query(message);
        if (q.complete()) truncated = dns::build_truncated_response(q.value.id, q.value.recursion_desired, q.value.q);
        if (truncated.empty() || truncated.size() > n)
          act = rrl_action::drop;  // never longer than the query (a compressed name, a malformed one)
      }
      rrl_period& p = rrl_period_;
      ctx_.hub.dns_rrl_counted(name_, act == rrl_action::answer ? 1 : 0, act == rrl_action::slip ? 1 : 0,
                               act == rrl_action::drop ? 1 : 0);
      if (act == rrl_action::answer) {
        ++p.answered;
      } else {
        ++(act == rrl_action::slip ? p.slipped : p.dropped);
        p.last_prefix = response_rate_limiter::prefix_text(peer.address());
        if (p.prefixes.size() < max_reported_prefixes) p.prefixes.insert(p.last_prefix);
        if (act == rrl_action::slip) co_await send_datagram_from(udp_, own_udp(), asio::buffer(truncated), peer, local);
        continue;
      }
    }
    outcome o = answer(std::string_view(buf.data(), n), route.get(), local.address());
    if (o.delay_ms > 0 && delayed_ >= max_delayed) {
      // Bounded: a flood of delayed queries holds no more than max_delayed
      // timers.
      const auto q = dns::parse_query(std::string_view(buf.data(), n));
      o.delay_ms = 0;
      o.rc = dns::rcode::servfail;
      o.error = "too_many_delayed";
      o.response = dns::build_response(q.value.id, q.value.recursion_desired, &q.value.q, o.rc);
    }
    if (o.delay_ms > 0) {
      ++delayed_;
      asio::co_spawn(udp_.get_executor(), answer_later(std::move(o), peer, local, std::move(route)),
                     [self = shared_from_this()](std::exception_ptr e) { log_exception(self->name_, e); });
      continue;
    }
    log(o, "udp", tcp::endpoint(peer.address(), peer.port()), route.get());
    if (o.answer) co_await send_datagram_from(udp_, own_udp(), asio::buffer(o.response), peer, local);
  }
}

awaitable<void> dns_responder::answer_later(outcome o, udp::endpoint peer, udp::endpoint local,
                                            std::shared_ptr<const route_info> route) {
  asio::steady_timer timer(udp_.get_executor());
  timers_.insert(&timer);
  timer.expires_after(std::chrono::milliseconds(o.delay_ms));
  auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
  timers_.erase(&timer);
  --delayed_;
  if (ec || stopped_) co_return;
  log(o, "udp", tcp::endpoint(peer.address(), peer.port()), route.get());
  co_await send_datagram_from(udp_, own_udp(), asio::buffer(o.response), peer, local);
}

awaitable<void> dns_responder::serve_tcp() {
  while (!stopped_) {
    tcp::endpoint peer;
    auto [ec, socket] = co_await tcp_.async_accept(peer, as_tuple_awaitable);
    if (stopped_ || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
    if (ec) continue;
    if (connections_.size() >= max_connections) {
      std::error_code ignored;
      socket.close(ignored);
      continue;
    }
    asio::co_spawn(tcp_.get_executor(), serve_connection(std::move(socket), peer),
                   [self = shared_from_this()](std::exception_ptr e) { log_exception(self->name_, e); });
  }
}

// RFC 1035 §4.2.2: each message with a 2-byte length, one answer after the
// other (a delayed one holds the connection's next answers back, as a
// single-threaded server would).
awaitable<void> dns_responder::serve_connection(tcp::socket socket, tcp::endpoint peer) {
  connections_.insert(&socket);
  std::error_code ec;
  const auto local = socket.local_endpoint(ec);
  const auto route = ctx_.routes.find(flow_id::tcp(peer, local));
  watchdog_deadline deadline;
  deadline = steady_clock::now() + tcp_idle;
  auto work = [&]() -> awaitable<void> {
    std::string acc;
    std::vector<char> buf(16 * 1024);
    for (;;) {
      for (;;) {
        const auto p = vless::parse_udp_packet(acc, 65'535);
        if (!p.complete()) break;
        outcome o = answer(p.value, route.get(), local.address());
        acc.erase(0, p.consumed);
        if (o.delay_ms > 0) {
          asio::steady_timer timer(socket.get_executor());
          timer.expires_after(std::chrono::milliseconds(o.delay_ms));
          deadline = steady_clock::now() + tcp_idle + std::chrono::milliseconds(o.delay_ms);
          co_await timer.async_wait(as_tuple_awaitable);
        }
        if (stopped_) co_return;
        log(o, "tcp", peer, route.get());
        if (!o.answer) co_return;
        char prefix[2];
        vless::put_udp_length(prefix, o.response.size());
        const std::array<asio::const_buffer, 2> out{asio::buffer(prefix), asio::buffer(o.response)};
        auto [wec, wn] = co_await asio::async_write(socket, out, as_tuple_awaitable);
        if (wec) co_return;
        deadline = steady_clock::now() + tcp_idle;
      }
      auto [rec, n] = co_await socket.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (rec) co_return;
      acc.append(buf.data(), n);
    }
  };
  co_await (work() || watchdog(deadline, [&socket] {
              std::error_code ignored;
              socket.close(ignored);
            }));
  connections_.erase(&socket);
}

}  // namespace vlessbench::target
