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

#include "core/wire/uuid.hpp"
#include "core/wire/parse_result.hpp"

namespace vlessbench::vless {

enum class command : std::uint8_t { tcp = 1, udp = 2, mux = 3 };
enum class address_type : std::uint8_t { ipv4 = 1, domain = 2, ipv6 = 3 };

struct request_header {
  uuid_bytes uuid{};
  std::string flow;          // addons protobuf field 1; empty when absent
  std::uint8_t command = 0;  // raw: validation of supported commands is the caller's policy
  std::uint16_t port = 0;
  address_type atyp = address_type::ipv4;
  std::array<std::uint8_t, 16> ip{};  // ipv4 uses the first 4 bytes
  std::string domain;
  std::string address_text() const;   // "1.2.3.4", "[::1]" or the domain
  bool operator==(const request_header&) const = default;
};

// Incremental: need_more until the whole header is there; consumed = header length (the rest is
// payload). invalid reasons: "bad_version", "bad_addons", "bad_address_type", "empty_domain",
// "bad_domain". A Mux (3) request carries no port/address (as in Xray-core): the header ends
// after the command, and the value reads port 0, domain "v1.mux.cool".
parse_result<request_header> parse_request(std::string_view buffer);

// Encodes a request header (client side, used by the runner and tests). Throws
// std::invalid_argument for a header parse_request would reject (bad domain, oversized flow...).
std::string encode_request(const request_header& h);

// Response header: 2 bytes (0, 0) when there are no addons.
inline constexpr std::array<char, 2> response_header{0, 0};
// Parses the server's response header; consumed = its length, value = the addons length.
parse_result<std::size_t> parse_response(std::string_view buffer);

// Constant-time compare (no early exit) for user lookup.

}  // namespace vlessbench::vless
