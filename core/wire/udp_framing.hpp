#pragma once
// VLESS command 2 (UDP) packet framing (DESIGN.md §3): after the request
// header, both directions carry datagrams as `u16 big-endian length ·
// datagram`, all for the one destination of the request. Pure functions over
// bytes; the daemon's UDP relay (server/udp_relay.hpp), the tests and the fuzz
// target (tests/fuzz/fuzz_udp_packet.cpp) use them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::vless {

// The largest datagram a UDP socket over IPv4 sends (65535 - 20 IP - 8 UDP
// header bytes). A length prefix above the cap is refused rather than waited
// for.
inline constexpr std::size_t max_udp_datagram = 65'507;
inline constexpr std::size_t udp_length_bytes = 2;

// One packet from the front of buffer. complete: value = the datagram (a view
// into buffer), consumed = 2 + its length; need_more: fewer bytes than the
// prefix announces; invalid
// ("udp_packet_too_large"): the prefix announces more than cap.
parse_result<std::string_view> parse_udp_packet(std::string_view buffer, std::size_t cap = max_udp_datagram);

// Appends the framed datagram to out. Throws std::length_error over
// max_udp_datagram.
void encode_udp_packet(std::string& out, std::string_view datagram);
// Writes the 2-byte prefix for a datagram of length n (n <= 65535) at out.
inline void put_udp_length(char* out, std::size_t n) {
  out[0] = static_cast<char>((n >> 8) & 0xff);
  out[1] = static_cast<char>(n & 0xff);
}

}  // namespace vlessbench::vless
