#include "target/udp_target.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/ntp_message.hpp"
#include "core/wire/route_header.hpp"
#include "core/wire/stun_message.hpp"
#include "core/net/udp_dest.hpp"
#include "core/runtime/udp_guard.hpp"

namespace vlessbench::target {

using udp = asio::ip::udp;

udp_echo_target::udp_echo_target(target_context& ctx, std::string name, udp::socket socket, udp_mode mode)
    : ctx_(ctx),
      name_(std::move(name)),
      socket_(std::move(socket)),
      sweep_timer_(socket_.get_executor()),
      refusals_(std::make_shared<udp_refusals>(ctx, socket_.get_executor(), "udp_target")),
      mode_(mode) {
  std::error_code ec;
  local_ = socket_.local_endpoint(ec);
  // On a wildcard address each datagram's own destination completes its flow's identity.
  if (const auto err = enable_destination_address(socket_))
    spdlog::warn("udp_target {}: no destination addresses ({}): routes on {} read direct", name_, err.message(),
                 local_.address().to_string());
  // A datagram forged with a relay socket's address would be echoed into its session as relayed.
  if (const auto err = drop_forged_local_sources(socket_))
    spdlog::warn("udp_target {}: no filter for forged local sources ({})", name_, err.message());
}

udp::endpoint udp_echo_target::endpoint() const { return local_; }

void udp_echo_target::start() {
  auto self = shared_from_this();
  auto done = [self](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("udp_target {}: unexpected exception: {}", self->name_, ex.what());
    }
  };
  asio::co_spawn(socket_.get_executor(), serve(), done);
  asio::co_spawn(socket_.get_executor(), sweep(), done);
}

void udp_echo_target::stop() {
  if (stopped_) return;
  stopped_ = true;
  std::error_code ignored;
  socket_.close(ignored);
  sweep_timer_.cancel();
  refusals_->stop();
  for (const auto& [key, f] : flows_) log_flow(key.first, f, "stop");
  flows_.clear();
}

void udp_echo_target::log_flow(const udp::endpoint& peer, const flow& f, std::string_view why) {
  const std::string peer_text = format_endpoint(tcp::endpoint(peer.address(), peer.port()));
  ctx_.events().emit(
      udp_packet_event{.listener = name_,
                       .peer = peer_text,
                       .route = f.route.get(),
                       .packets_in = f.packets_in,
                       .bytes_in = f.bytes_in,
                       .packets_out = f.packets_out,
                       .bytes_out = f.bytes_out,
                       .short_answers = f.short_answers,
                       .unanswered = f.unanswered,
                       .duration_us = std::chrono::duration_cast<std::chrono::microseconds>(f.last - f.first).count(),
                       .close_reason = why});
}

udp_echo_target::flow& udp_echo_target::flow_for(const flow_key& key, std::chrono::steady_clock::time_point now) {
  if (auto it = flows_.find(key); it != flows_.end()) return it->second;
  if (flows_.size() >= max_flows) {
    auto oldest = std::min_element(flows_.begin(), flows_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
    log_flow(oldest->first.first, oldest->second, "evicted");
    flows_.erase(oldest);
  }
  flow f;
  f.first = now;
  // A VLESS session registers its socket before it sends, so the lookup at a
  // flow's first datagram is proof; serve() re-checks it for every datagram.
  f.route = ctx_.routes.find(flow_id::udp(key.first, key.second));
  return flows_.emplace(key, std::move(f)).first->second;
}

awaitable<void> udp_echo_target::serve() {
  std::vector<char> buf(65'535);
  datagram d;
  while (!stopped_) {
    const auto ec = co_await receive_datagram(socket_, local_, asio::buffer(buf), d);
    const std::size_t n = d.size;
    const flow_key key{d.peer, d.local};
    if (stopped_ || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
    if (ec) continue;  // an ICMP error for an earlier echo: the next datagram
    // Loops from one spoofed datagram (core/runtime/udp_guard.hpp): never answer another echo's answer,
    // a reflector port or one of the daemon's own listeners.
    std::string_view refusal = udp_source_refusal(d.peer, d.local, ctx_.own_udp_ports());
    if (refusal.empty() && is_udp_echo_answer(std::string_view(buf.data(), n))) refusal = "echo_answer";
    if (!refusal.empty()) {
      refusals_->note(name_, refusal, d.peer);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    // A peer address is reused: a closed VLESS session's relay socket and a direct client may
    // get the same ephemeral port one after the other while the old flow is still in the table.
    // So the route is looked up per datagram; another session (or none) ends the old flow
    // ("route_changed") and starts a new one, and every echo names the route it really took.
    // A route is its session and sub-connection: two UDP subs of one mux session get the same
    // relay port one after the other too.
    if (auto it = flows_.find(key); it != flows_.end()) {
      const auto route = ctx_.routes.find(flow_id::udp(key.first, key.second));
      const auto id = [](const std::shared_ptr<const route_info>& r) {
        return r ? std::pair{r->session_id, r->sub} : std::pair<std::uint64_t, std::uint32_t>{};
      };
      if (id(route) != id(it->second.route)) {
        log_flow(key.first, it->second, "route_changed");
        flows_.erase(it);
      }
    }
    flow& f = flow_for(key, now);
    f.last = now;
    ++f.packets_in;
    f.bytes_in += n;
    udp_echo_answer echo;
    if (mode_ == udp_mode::echo) {
      // Never longer than a direct datagram (no amplifier): the trailer takes the datagram's last bytes.
      // A relayed one too short for it gets it appended: its answer goes back into the session.
      echo = format_udp_echo(std::string_view(buf.data(), n), name_, f.route.get());
    } else {
      probe_answer a = answer_probe(std::string_view(buf.data(), n), d.peer, d.local, f.route.get());
      if (!a.refusal.empty()) refusals_->note(name_, a.refusal, d.peer);
      if (!a.bytes.empty()) echo = {udp_echo_form::full, std::move(a.bytes)};
    }
    if (echo.form == udp_echo_form::none) {
      ++f.unanswered;
      ctx_.hub.udp_echo_counted(name_, udp_echo_form::none, n, 0);
      continue;
    }
    if (echo.form == udp_echo_form::short_form) ++f.short_answers;
    const auto sec = co_await send_datagram_from(socket_, local_, asio::buffer(echo.bytes), d.peer, d.local);
    if (stopped_) co_return;
    ctx_.hub.udp_echo_counted(name_, echo.form, n, sec ? 0 : echo.bytes.size());
    if (!sec) {
      // The flow may have been evicted while the send waited: count only into
      // one still there.
      if (auto it = flows_.find(key); it != flows_.end()) {
        ++it->second.packets_out;
        it->second.bytes_out += echo.bytes.size();
      }
    }
  }
}

udp_echo_target::probe_answer udp_echo_target::answer_probe(std::string_view datagram, const udp::endpoint& peer,
                                                            const udp::endpoint& local, const route_info* route) {
  // The NTP clock is read at arrival, before anything else is spent on the request.
  const auto arrival = std::chrono::system_clock::now();
  // What a forged source could reflect is limited as the DNS responder's answers are: not a VLESS
  // session's relay, nor a loopback source or the address the request was sent to.
  const auto source = unmapped(peer.address());
  if (!route && !source.is_loopback() && source != unmapped(local.address())) {
    const limits_config l = ctx_.limits();
    const rrl_settings s{.responses_per_second = l.dns_rrl_responses_per_second, .slip = 0, .window = l.dns_rrl_window};
    if (rrl_.check(peer.address(), s, std::chrono::steady_clock::now()) != rrl_action::answer)
      return {{}, "rate_limited"};
  }
  const auto ntp_now = [](std::chrono::system_clock::time_point t) {
    return ntp::from_unix_ns(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
  };
  if (mode_ == udp_mode::ntp) {
    const auto r = ntp::parse_request(datagram);
    if (!r.complete()) return {{}, r.reason};
    // 48 bytes, never more than the request: no room for the route, which the flow line proves.
    return {ntp::format_response(r.value, ntp_now(arrival), ntp_now(std::chrono::system_clock::now())), {}};
  }
  const auto r = stun::parse_request(datagram);
  if (!r.complete()) return {{}, r.reason};
  stun::mapped_address mapped;
  const auto from = unmapped(peer.address());
  mapped.v6 = from.is_v6();
  mapped.port = peer.port();
  if (mapped.v6) {
    const auto b = from.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), mapped.bytes.begin());
  } else {
    const auto b = from.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), mapped.bytes.begin());
  }
  const std::string software = name_ + " " + format_route_header(route);
  // A relayed request's answer goes back into its session: no size bound; a direct one's is its size.
  std::string answer = stun::format_response(r.value, mapped, software, route ? 0 : datagram.size());
  if (answer.empty()) return {{}, "stun_answer_larger_than_request"};
  return {std::move(answer), {}};
}

// Logs and forgets the flows idle for [limits] udp_idle_timeout_ms, checking a
// few times per period.
awaitable<void> udp_echo_target::sweep() {
  while (!stopped_) {
    const auto idle = ctx_.limits().udp_idle_timeout;
    sweep_timer_.expires_after(std::clamp<std::chrono::milliseconds>(idle / 4, std::chrono::milliseconds(50),
                                                                     std::chrono::milliseconds(1000)));
    // Cancelled only by stop(), which stopped_ tells; any other wake is a sweep.
    co_await sweep_timer_.async_wait(as_tuple_awaitable);
    if (stopped_) co_return;
    const auto now = std::chrono::steady_clock::now();
    for (auto it = flows_.begin(); it != flows_.end();) {
      if (now - it->second.last >= idle) {
        log_flow(it->first.first, it->second, "idle");
        it = flows_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace vlessbench::target
