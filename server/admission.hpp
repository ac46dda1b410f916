#pragma once
// Who may open a VLESS session, with which request (STYLE.md: admission outside the session, as
// trojan keeps its authenticator apart). Pure: a config and a parsed header in, a verdict out;
// the session applies it (server/vless_server.cpp) and the unit tests pin it
// (tests/unit/server/test_vless_admission.cpp). Destinations are checked later, per resolved address
// (server/destination_policy.hpp), and live admission against reloads in server/live_config.hpp.
#include <optional>
#include <string>
#include <string_view>

#include "core/config/config.hpp"
#include "core/wire/vless_codec.hpp"

namespace vlessbench {

// The destination sing-mux (sing-box's and mihomo's multiplex) opens its session to: served over a TCP
// request (server/sing_mux_session.hpp), each stream naming its own destination.
inline constexpr std::string_view sing_mux_domain = "sp.mux.sing-box.arpa";
bool is_sing_mux_request(const vless::request_header& header);

// Why a request is refused: its vless.reject reason and detail.
struct refusal {
  std::string_view reason;
  std::string detail;
};

struct admission_verdict {
  const user_config* user = nullptr;  // the header's user when known (also on a later refusal)
  std::optional<refusal> refused;     // none: admitted
  bool admitted() const { return !refused; }
};

// The user by UUID, in constant time over the whole list (the position of a match must not
// show in timing), then what this daemon serves: no flow, command 1 (TCP), 2 (UDP) or 3 (Mux.Cool,
// whose header has no destination: server/mux_session.hpp checks each New frame's), a port, and for a
// domain a name a resolver may be asked for.
admission_verdict admit_request(const config& cfg, const vless::request_header& header);

// At most 253 bytes (an absolute name's final dot aside), labels of 1..63: the wire allows 255
// bytes of anything, the resolver should see only names it can ask for.
bool valid_dns_name(std::string_view name);

}  // namespace vlessbench
