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

}  // namespace vlessbench
