#pragma once
// The vless.reject reasons the server decides itself (docs/sessions.md "vless.reject"): one enum,
// one to_string, so a reason is spelt in one place. Reasons from another vocabulary pass through
// as strings: a wire parser's (core/wire: bad_version, bad_addons, ...), a transport's opening or
// stream failure (server/transport), the destination policy's (server/destination_policy),
// Vision's and sing-mux's own.
#include <cstddef>
#include <string_view>

namespace vlessbench {

enum class reject_code {
  handshake_timeout,
  no_header,
  truncated_header,
  header_timeout,
  header_too_large,
  tls_error,
  unknown_user,
  flow_unsupported,
  sing_mux_not_tcp,
  bad_command,
  bad_port,
  bad_domain,
  too_many_sessions,
  too_many_sessions_from_client,
  client_budget,
  evicted,
  fd_exhausted,
  drain,
  resolve_failed,
  resolve_timeout,
  connect_failed,
  connect_timeout,
  route_conflict,
};
// The last enumerator above ends the count (a new reason goes before it, or moves this).
inline constexpr std::size_t reject_code_count = static_cast<std::size_t>(reject_code::route_conflict) + 1;

// The reason as the vless.reject line spells it; static storage.
std::string_view to_string(reject_code c);

}  // namespace vlessbench
