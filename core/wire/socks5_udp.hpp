#pragma once
// SOCKS5 UDP relay datagrams (RFC 1928 §7), as pure functions over bytes: after a UDP ASSOCIATE
// on the TCP control connection, every datagram to and from the relay carries this header:
//   RSV(2)=0 · FRAG(1) · ATYP(1: 1 IPv4, 3 domain, 4 IPv6) · DST.ADDR · DST.PORT(2 BE) · DATA
// The runner's SOCKS5 UDP path (runner/datagram.cpp) writes and reads it; the fuzz target
// tests/fuzz/fuzz_socks5_udp.cpp checks the parser. Fragments (FRAG != 0) are refused, as most
// clients do (RFC 1928 lets an implementation not support fragmentation).
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::socks5 {

struct udp_datagram {
  std::string host;  // IPv4/IPv6 literal as text (IPv6 without brackets), or the domain
  std::uint16_t port = 0;
  std::string_view data;  // the payload: a view into the parsed bytes
};

// The header for host:port (an IPv4 or IPv6 literal travels as an address, anything else as a
// domain name) followed by data. Throws std::invalid_argument for an empty or >255-byte domain.
std::string encode_udp_datagram(std::string_view host, std::uint16_t port, std::string_view data);

// One whole datagram. complete: consumed = the header's length (data is the rest); invalid
// reasons: "short_header", "bad_reserved" (RSV not zero), "fragmented" (FRAG != 0),
// "bad_address_type", "empty_domain". Never need_more (a datagram is whole).
parse_result<udp_datagram> parse_udp_datagram(std::string_view datagram);

}  // namespace vlessbench::socks5
