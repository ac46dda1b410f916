#pragma once
// One emit per event: the call that writes an event's access-log line (core/log/access_log.hpp)
// and feeds the admin dashboard and /metrics (core/log/state_hub.hpp) from the same struct, so no
// event reaches one and not the other (as nghttp2 writes its access line from one call site).
// The daemon's VLESS and reload events go through here (server/runtime.hpp: runtime::events), the
// targets' answers too (target/target_context.hpp: target_context::events); a new event kind gets
// its overload here, next to what the dashboard makes of it. Counts the dashboard takes per
// datagram rather than per line (udp.refused, dns.rrl: a line sums a second) stay with their
// counters.
#include <cstdint>

#include "core/log/access_events.hpp"
#include "core/log/access_log.hpp"
#include "core/log/state_hub.hpp"

namespace vlessbench {

class event_emitter {
 public:
  event_emitter(access_log& log, state_hub& hub) : log_(log), hub_(hub) {}

  // vless.reject: the line, and the listener's reject counters by reason.
  void emit(const vless_reject_event& e);
  // vless.session: the line, and the listener's session counters, phase histograms, recent ring.
  void emit(const vless_session_event& e);
  // vless.sub: the line only; the dashboard counts a Mux session's subs from its vless.session.
  void emit(const vless_sub_event& e);
  // xhttp.connection: the line only (an uplink-only connection is no refusal and no session).
  void emit(const xhttp_connection_event& e);
  // config.reload: the line, and the dashboard's reload ring.
  void emit(const config_reload_event& e);

  // What a target answered, for the listener's counters (relayed or direct by the event's route):
  // how many requests, datagrams or connections, and the bytes each way on the wire, given beside
  // the event because its line does not always carry them (a refused request's head, the size of
  // a DNS answer).
  struct answered {
    std::uint64_t count = 1;
    std::uint64_t bytes_up = 0;    // from the peer
    std::uint64_t bytes_down = 0;  // to the peer
  };
  // http.request, dns.query: the line and those counters.
  void emit(const http_request_event& e, answered a);
  void emit(const dns_query_event& e, answered a);
  // banner.connection, udp.packet (a flow): the line, and counters its own fields give (one
  // connection or the flow's datagrams from the peer, bytes_in and bytes_out).
  void emit(const banner_connection_event& e);
  void emit(const udp_packet_event& e);

 private:
  access_log& log_;
  state_hub& hub_;
};

}  // namespace vlessbench
