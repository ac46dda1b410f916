#pragma once
// The HTTP/1.1 upgrade both ws_stream and httpupgrade_stream open with: read the request head
// (core/wire/ws_upgrade.hpp parses it), answer 101 or an HTTP error with the reason, and hand back
// what followed the head. Bounded by the session's handshake deadline (the caller's watchdog).
#include <string>
#include <system_error>

#include "core/wire/http_parser.hpp"
#include "core/wire/transport_spec.hpp"
#include "core/wire/ws_upgrade.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench::transport {

struct upgrade_outcome {
  std::string reason;  // the reject reason when the upgrade failed
  ws::upgrade_request request;
  std::string rest;  // bytes after the head: frames (ws) or the VLESS stream (httpupgrade)
};

inline ws::upgrade_rules upgrade_rules_for(const transport_spec& t) {
  return {t.kind == transport_kind::ws ? ws::upgrade_kind::websocket : ws::upgrade_kind::httpupgrade, t.path, t.host,
          t.kind == transport_kind::ws ? t.max_early_data : 0u, t.early_data_header};
}

// Opens Lower (tls_stream or plain_stream), then reads and answers the upgrade request. On failure
// out.reason names it: the lower transport's failure(), or the upgrade's reject reason.
template <class Lower>
awaitable<std::error_code> open_upgraded(Lower& lower, const transport_spec& t, const open_clock& clock,
                                         upgrade_outcome& out) {
  if (auto ec = co_await lower.open(clock)) {
    out.reason = lower.failure().value_or(std::string_view{});
    co_return ec;
  }
  const ws::upgrade_rules rules = upgrade_rules_for(t);
  std::string head(http::max_head_bytes, '\0');
  std::size_t used = 0;
  for (;;) {
    auto [ec, n] =
        co_await lower.async_read_some(asio::buffer(head.data() + used, head.size() - used), as_tuple_awaitable);
    if (ec) {
      out.reason = used == 0 ? "no_upgrade_request" : "truncated_upgrade_request";
      co_return ec;
    }
    used += n;
    auto parsed = ws::parse_upgrade_request(std::string_view(head.data(), used), rules);
    if (parsed.need_more() && used < head.size()) continue;
    if (!parsed.complete()) {
      out.reason = parsed.need_more() ? "upgrade_head_too_large" : std::string(parsed.reason);
      const std::string answer = ws::format_reject_response(out.reason);
      auto [wec, wn] = co_await asio::async_write(lower, asio::buffer(answer), as_tuple_awaitable);
      (void)wec;
      (void)wn;
      co_return std::make_error_code(std::errc::protocol_error);
    }
    out.rest.assign(head.data() + parsed.consumed, used - parsed.consumed);
    out.request = std::move(parsed.value);
    const std::string answer = ws::format_upgrade_response(out.request, rules.kind);
    auto [wec, wn] = co_await asio::async_write(lower, asio::buffer(answer), as_tuple_awaitable);
    (void)wn;
    if (wec) {
      out.reason = "upgrade_write_failed";
      co_return wec;
    }
    clock.stamp(&session_phases::upgrade_done);
    co_return std::error_code{};
  }
}

}  // namespace vlessbench::transport
