#pragma once
// VLESS version 0 wire format (DESIGN.md §3), as pure functions over bytes.
//   request:  ver(1)=0 · uuid(16) · addons_len(1) · addons(protobuf) · cmd(1) · port(2 BE) ·
//             atyp(1: 1=IPv4, 2=domain, 3=IPv6) · addr · payload...
//   response: ver(1)=0 · addons_len(1) · addons · payload...
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/destination.hpp"
#include "core/wire/uuid.hpp"
#include "core/wire/parse_result.hpp"

namespace vlessbench::vless {

enum class command : std::uint8_t { tcp = 1, udp = 2, mux = 3 };
using vlessbench::address_type;

struct request_header {
  uuid_bytes uuid{};
  std::string flow;          // addons protobuf field 1; empty when absent
  std::uint8_t command = 0;  // raw: validation of supported commands is the caller's policy
  // port, address; net is udp for command 2 (parse_request sets it; encode_request ignores it)
  destination dest;
  bool operator==(const request_header&) const = default;
};

// Incremental: need_more until the whole header is there; consumed = header length (the rest is
// payload). invalid reasons: "bad_version", "bad_addons", "bad_address_type", "empty_domain",
// "bad_domain". A Mux (3) request carries no port/address (as in Xray-core): the header ends
// after the command, and the value reads port 0, domain "v1.mux.cool" (mux_domain).
parse_result<request_header> parse_request(std::string_view buffer);

// What Xray-core reports as the destination of a Mux request, which has no address on the wire.
inline constexpr std::string_view mux_domain = "v1.mux.cool";

// Encodes a request header (client side, used by the runner and tests). Throws
// std::invalid_argument for a header parse_request would reject (bad domain, oversized flow...).
std::string encode_request(const request_header& h);

// Response header: 2 bytes (0, 0) when there are no addons.
inline constexpr std::array<char, 2> response_header{0, 0};
// Parses the server's response header; consumed = its length, value = the addons length.
parse_result<std::size_t> parse_response(std::string_view buffer);

// Constant-time compare (no early exit) for user lookup.

}  // namespace vlessbench::vless
