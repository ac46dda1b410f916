#include "target/udp_refusals.hpp"

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench::target {

void udp_refusals::note(std::string_view listener, std::string_view reason, const asio::ip::udp::endpoint& peer) {
  ctx_.hub.udp_refused(listener, reason);
  if (stopped_) return;
  if (listener_ != listener) listener_.assign(listener);
  const std::string sample = format_endpoint(tcp::endpoint(peer.address(), peer.port()));
  if (auto r = tally_.note(reason, sample, refusal_tally::clock::now()))
    write(*r);
  else
    arm();
}

void udp_refusals::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_.cancel();
  // Every count, due or not: nothing writes them later.
  for (const auto& r : tally_.due(refusal_tally::clock::now() + refusal_tally::period)) write(r);
}

void udp_refusals::write(const refusal_tally::report& r) const {
  ctx_.log.write(format_event(
      udp_refused_event{.listener = listener_, .reason = r.reason, .datagrams = r.count, .last_peer = r.sample}));
  spdlog::warn(
      "{} {}: {} datagram(s) not answered: {} (last from {}; udp.refused in the access log, "
      "vlessbench_udp_refused_total in /metrics)",
      kind_, listener_, r.count, r.reason, r.sample);
}

// Counts held back within a second are written once it is over, even when no datagram follows.
void udp_refusals::arm() {
  if (armed_) return;
  armed_ = true;
  timer_.expires_after(refusal_tally::period);
  timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    self->armed_ = false;
    if (ec || self->stopped_) return;
    for (const auto& r : self->tally_.due(refusal_tally::clock::now())) self->write(r);
  });
}

}  // namespace vlessbench::target
