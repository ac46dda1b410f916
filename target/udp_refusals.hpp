#pragma once
// Datagrams the UDP echo and the DNS responder do not answer (core/runtime/udp_guard.hpp), where an
// operator looks (docs/target.md "Datagrams not answered"): each is counted in /metrics by listener
// and reason (vlessbench_udp_refused_total); the access log gets at most one udp.refused line per
// reason a second with the count, and the human log one warning line with it. The first refusal
// after a quiet second is written at once, the rest of that second once it is over
// (core/log/refusal_tally.hpp): a flood of forged datagrams costs one line a second, not one each.
// One per target, on its executor; shared, because its timer's handler holds it.
#include <memory>
#include <string>
#include <string_view>

#include "core/log/refusal_tally.hpp"
#include "core/net/asio_compat.hpp"
#include "target/target_context.hpp"

namespace vlessbench::target {

class udp_refusals : public std::enable_shared_from_this<udp_refusals> {
 public:
  // kind: how the human log names the target ("udp_target", "dns").
  udp_refusals(target_context& ctx, const asio::any_io_executor& ex, std::string_view kind)
      : ctx_(ctx), kind_(kind), timer_(ex) {}

  // One datagram from peer that listener did not answer, for reason.
  void note(std::string_view listener, std::string_view reason, const asio::ip::udp::endpoint& peer);
  // At the target's stop: writes the counts not written yet; later notes are only counted.
  void stop();

 private:
  void write(const refusal_tally::report& r) const;
  void arm();

  target_context& ctx_;
  std::string kind_;
  std::string listener_;  // the name of the last note: a reload may rename the target
  refusal_tally tally_;
  asio::steady_timer timer_;
  bool armed_ = false;
  bool stopped_ = false;
};

}  // namespace vlessbench::target
