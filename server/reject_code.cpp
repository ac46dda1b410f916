#include "server/reject_code.hpp"

namespace vlessbench {

std::string_view to_string(reject_code c) {
  switch (c) {
    case reject_code::handshake_timeout: return "handshake_timeout";
    case reject_code::no_header: return "no_header";
    case reject_code::truncated_header: return "truncated_header";
    case reject_code::header_timeout: return "header_timeout";
    case reject_code::header_too_large: return "header_too_large";
    case reject_code::tls_error: return "tls_error";
    case reject_code::unknown_user: return "unknown_user";
    case reject_code::flow_unsupported: return "flow_unsupported";
    case reject_code::sing_mux_not_tcp: return "sing_mux_not_tcp";
    case reject_code::bad_command: return "bad_command";
    case reject_code::bad_port: return "bad_port";
    case reject_code::bad_domain: return "bad_domain";
    case reject_code::too_many_sessions: return "too_many_sessions";
    case reject_code::too_many_sessions_from_client: return "too_many_sessions_from_client";
    case reject_code::client_budget: return "client_budget";
    case reject_code::evicted: return "evicted";
    case reject_code::fd_exhausted: return "fd_exhausted";
    case reject_code::drain: return "drain";
    case reject_code::resolve_failed: return "resolve_failed";
    case reject_code::resolve_timeout: return "resolve_timeout";
    case reject_code::connect_failed: return "connect_failed";
    case reject_code::connect_timeout: return "connect_timeout";
    case reject_code::route_conflict: return "route_conflict";
  }
  return "?";
}

}  // namespace vlessbench
