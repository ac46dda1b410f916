#pragma once
// STUN messages for the [[udp_target]] in mode "stun" (docs/target.md): a pure parser for Binding
// requests (RFC 8489, with the magic cookie) and a builder for the success response: XOR-MAPPED-ADDRESS
// (the source the request came from) and a SOFTWARE attribute naming the route, FINGERPRINT when the
// request had one. Plus the runner's side (a request, the response's parse). No sockets.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::stun {

inline constexpr std::size_t header_bytes = 20;
inline constexpr std::uint32_t magic_cookie = 0x2112A442U;
inline constexpr std::uint16_t binding_request = 0x0001, binding_success = 0x0101;
inline constexpr std::uint16_t attr_xor_mapped_address = 0x0020, attr_software = 0x8022, attr_fingerprint = 0x8028,
                               attr_padding = 0x0026, attr_change_request = 0x0003;
// A request longer than this is refused (no Binding request a client sends comes near it).
inline constexpr std::size_t max_request_bytes = 1024;
// The SOFTWARE value starts with this, then the listener and the route header value.
inline constexpr std::string_view software_prefix = "vlessbench ";

using transaction_id = std::array<std::uint8_t, 12>;

struct request {
  transaction_id id{};
  bool fingerprint = false;  // the request carried FINGERPRINT: so does the answer
};

// A Binding request: complete (consumed = the whole datagram), or invalid with a reason: too short or
// long, not STUN (top bits, no magic cookie: RFC 3489's classic STUN is not served), a length that
// is not the datagram's, an attribute past the end, a response or indication (never answered),
// another method, a CHANGE-REQUEST asking for another address or port, an unknown attribute the
// server must understand (type below 0x8000), a FINGERPRINT that does not match.
parse_result<request> parse_request(std::string_view datagram);

// A mapped address: 4 (IPv4) or 16 (IPv6) address bytes and the port.
struct mapped_address {
  std::array<std::uint8_t, 16> bytes{};
  bool v6 = false;
  std::uint16_t port = 0;
};

// The success response: XOR-MAPPED-ADDRESS, then SOFTWARE = software_prefix + software (whole or not at all),
// then FINGERPRINT if asked. max_size bounds the whole answer (0: no bound); SOFTWARE is left out where
// the rest leaves too little room for it, and the answer is empty when even XOR-MAPPED-ADDRESS does not fit.
std::string format_response(const request& req, const mapped_address& mapped, std::string_view software,
                            std::size_t max_size);
// A Binding request with that transaction id, padded with a PADDING attribute to at least min_size
// bytes (room for the answer a direct source may get: never longer than its request).
std::string format_request(const transaction_id& id, std::size_t min_size = 0);

struct response {
  transaction_id id{};
  mapped_address mapped;
  std::string software;  // without the prefix: "<listener> <route>"; empty when absent
};
// A success response: complete, or invalid (not a success response, no XOR-MAPPED-ADDRESS, broken).
parse_result<response> parse_response(std::string_view datagram);

// CRC-32 (ISO 3309) of the bytes, as FINGERPRINT uses it.
std::uint32_t crc32(std::string_view bytes);

}  // namespace vlessbench::stun
