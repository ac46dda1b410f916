#pragma once
// A REALITY listener's opening (docs/configuration.md "REALITY"), before BoringSSL sees a byte:
// the ClientHello record is read here (bounded: one record, at most 16 KiB + 5), judged
// (core/net/reality_auth.hpp), and either handed to BoringSSL with the per-connection
// certificate (tls_stream feeds it the bytes read) or relayed byte for byte, with everything the
// client sends after it, to the listener's target. The relay is bounded by the session's
// handshake deadline (its watchdog closes the client socket) and holds two 16 KiB buffers.
#include <cstdint>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/log/access_events.hpp"
#include "core/net/asio_compat.hpp"
#include "core/net/policy_stream.hpp"
#include "core/net/reality_auth.hpp"

namespace vlessbench::reality {

// The error category of a refused ClientHello: the value is the refusal, the message the detail
// a vless.reject line carries.
const std::error_category& refusal_category();
inline std::error_code make_error_code(refusal r) { return {static_cast<int>(r), refusal_category()}; }

struct opening {
  refusal why = refusal::none;  // none: authenticated
  key32 auth_key{};
  std::vector<std::uint8_t> hello;  // the bytes read (the whole record when one came)
  // What the log line says of a ClientHello BoringSSL never saw (tls::ja4_received's kind).
  std::string ja4, groups, key_shares;
  std::optional<fallback_facts> fallback;  // the relay to the target, once it was tried
};

// Reads and judges the ClientHello. A read error leaves why = bad_client_hello with read_error set.
awaitable<opening> read_and_judge(policy_stream& client, listener_state& state, std::error_code& read_error);

// The refused connection's relay to the target: the bytes read first, then both ways until
// either side ends. `out` is filled as it runs: its time from the target dial, the bytes each way,
// and its end ("no_target", "target_down", "target_error", "client_eof", "target_eof",
// "client_error", or "closed": the client socket closed under it by the session, whose log line
// names why). Returns a detail for the debug log.
awaitable<std::string> relay_to_target(tcp::socket& client, const listener_state& state,
                                       const std::vector<std::uint8_t>& hello, fallback_facts& out);

}  // namespace vlessbench::reality
