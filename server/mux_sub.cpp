#include "server/mux_sub.hpp"

#include "core/log/access_events.hpp"

namespace vlessbench::vless_server::detail {

void mux_sub_conn::name_route(const route_info& session, std::int64_t now_us) {
  info = std::make_shared<route_info>(session);
  info->sub = number;
  info->phases.resolved = -1;
  info->phases.upstream_connected = -1;
  info->phases.first_upstream_byte = -1;
  info->phases.first_client_byte = -1;
  info->phases.sub_opened = now_us;  // its own phases start at its New (Server-Timing)
}

void mux_sub_conn::close_sockets() {
  if (reg) reg->release();
  std::error_code ignored;
  tcp_sock.close(ignored);
  for (auto& fl : flows) {
    if (fl->reg) fl->reg->release();
    fl->sock.close(ignored);
    fl->slot.reset();
  }
  dialer.cancel();
  wake.cancel();
  deadline.cancel();
  std::deque<mux_packet>().swap(queue);
}

void emit_sub_closed(runtime& rt, const route_info& session, std::string_view listener, const mux_sub_conn& c,
                     std::string_view reason, std::string_view error, std::string_view detail) {
  const bool udp_sub = c.udp();
  const vless_sub_event e{
      .session = session.session_id,
      .sub = c.number,
      .mux_id = c.id,
      .listener = listener,
      .user = session.user,
      .net = udp_sub ? "udp" : "tcp",
      .dest = c.dest,
      .xudp = c.xudp,
      .bytes_up = c.bytes_up,
      .bytes_down = c.bytes_down,
      .packets_up = udp_sub ? std::optional(c.packets_up) : std::nullopt,
      .packets_down = udp_sub ? std::optional(c.packets_down) : std::nullopt,
      .packets_dropped = udp_sub ? std::optional(c.dropped) : std::nullopt,
      .connect_us = c.connect_us,
      .duration_us = std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - c.opened).count(),
      .close_reason = reason,
      .error = error,
      .detail = detail};
  rt.events.emit(e);
}

void emit_sub_refused(runtime& rt, const route_info& session, std::string_view listener, std::uint16_t id,
                      const std::optional<destination>& dest, std::string_view why, std::string_view detail) {
  const std::string named = dest ? format_destination(*dest) : std::string();
  const vless_sub_event e{.session = session.session_id,
                          .mux_id = id,
                          .listener = listener,
                          .user = session.user,
                          .net = dest ? (dest->net == network::udp ? "udp" : "tcp") : "",
                          .dest = named,
                          .close_reason = "rejected",
                          .error = why,
                          .detail = detail};
  rt.events.emit(e);
}

}  // namespace vlessbench::vless_server::detail
