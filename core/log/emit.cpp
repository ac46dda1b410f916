#include "core/log/emit.hpp"

namespace vlessbench {

void event_emitter::emit(const vless_reject_event& e) {
  log_.write(format_event(e));
  hub_.rejected(e);
}

void event_emitter::emit(const vless_session_event& e) {
  log_.write(format_event(e));
  hub_.session_closed(e);
}

void event_emitter::emit(const vless_sub_event& e) { log_.write(format_event(e)); }

void event_emitter::emit(const config_reload_event& e) {
  log_.write(format_event(e));
  hub_.reloaded(e);
}

void event_emitter::emit(const http_request_event& e, answered a) {
  log_.write(format_event(e));
  hub_.target_answered(e.listener, e.route != nullptr, a.count, a.bytes_up, a.bytes_down);
}

void event_emitter::emit(const banner_connection_event& e, answered a) {
  log_.write(format_event(e));
  hub_.target_answered(e.listener, e.route != nullptr, a.count, a.bytes_up, a.bytes_down);
}

void event_emitter::emit(const udp_packet_event& e, answered a) {
  log_.write(format_event(e));
  hub_.target_answered(e.listener, e.route != nullptr, a.count, a.bytes_up, a.bytes_down);
}

void event_emitter::emit(const dns_query_event& e, answered a) {
  log_.write(format_event(e));
  hub_.target_answered(e.listener, e.route != nullptr, a.count, a.bytes_up, a.bytes_down);
}

}  // namespace vlessbench
