#include "core/log/emit.hpp"

namespace vlessbench {

namespace {

// An authenticated VLESS session's own lines have a rate budget apart from everyone else's
// (access_log::line_class): a refusal after the header named a user, a session's line, its
// sub-connections' lines, and a target's answer it relayed.
constexpr auto session_line = access_log::line_class::session;
constexpr auto other_line = access_log::line_class::other;

}  // namespace

void event_emitter::emit(const vless_reject_event& e) {
  log_.write(format_event(e), e.user.empty() ? other_line : session_line);
  hub_.rejected(e);
}

void event_emitter::emit(const vless_session_event& e) {
  log_.write(format_event(e), session_line);
  hub_.session_closed(e);
}

void event_emitter::emit(const vless_sub_event& e) { log_.write(format_event(e), session_line); }

void event_emitter::emit(const xhttp_connection_event& e) { log_.write(format_event(e), other_line); }

void event_emitter::emit(const config_reload_event& e) {
  log_.write(format_event(e));
  hub_.reloaded(e);
}

namespace {

// A target's answer: its line, then its count, relayed when it came through a VLESS session.
template <class Event>
void write_answer(access_log& log, state_hub& hub, const Event& e, const event_emitter::answered& a) {
  log.write(format_event(e), e.route != nullptr ? session_line : other_line);
  hub.target_answered(e.listener, e.route != nullptr, a.count, a.bytes_up, a.bytes_down);
}

}  // namespace

void event_emitter::emit(const http_request_event& e, answered a) { write_answer(log_, hub_, e, a); }
void event_emitter::emit(const banner_connection_event& e) {
  write_answer(log_, hub_, e, {.bytes_up = e.bytes_in, .bytes_down = e.bytes_out});
}
void event_emitter::emit(const udp_packet_event& e) {
  write_answer(log_, hub_, e, {.count = e.packets_in, .bytes_up = e.bytes_in, .bytes_down = e.bytes_out});
}
void event_emitter::emit(const dns_query_event& e, answered a) { write_answer(log_, hub_, e, a); }

}  // namespace vlessbench
