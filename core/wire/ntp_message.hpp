#pragma once
// NTP packets for the [[udp_target]] in mode "ntp" (docs/target.md): a pure parser for client
// requests (RFC 5905 §7.3, versions 3 and 4, mode 3) and a builder for the server's answer (mode 4,
// the daemon's clock), plus the runner's side (a request, the answer's parse). No sockets. The answer
// is the 48-byte header alone: never longer than a request, which is at least that. The format has
// no room for the route: the target's udp.packet line proves it.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::ntp {

inline constexpr std::size_t header_bytes = 48;
// A request longer than this (extension fields, a MAC) is refused: no client of a delay test sends one.
inline constexpr std::size_t max_request_bytes = 1024;
inline constexpr std::uint8_t mode_client = 3, mode_server = 4;
// Seconds from the NTP era 0 (1900-01-01) to the Unix epoch.
inline constexpr std::uint64_t unix_epoch_offset = 2'208'988'800ULL;

struct packet {
  std::uint8_t leap = 0, version = 0, mode = 0, stratum = 0, poll = 0;
  std::int8_t precision = 0;
  std::uint32_t reference_id = 0;
  std::uint64_t reference = 0, origin = 0, receive = 0, transmit = 0;  // 32.32 fixed point, NTP era
};

// A client's request: complete (consumed = the whole datagram), or invalid with a reason (too short
// or long, a version other than 3 or 4, a mode other than 3 — a server's answer is never answered).
parse_result<packet> parse_request(std::string_view datagram);
// Any NTP header (the runner reads the server's answer): complete or invalid (too short, version 0).
parse_result<packet> parse_packet(std::string_view datagram);

// The server's answer: the request's version and poll, mode 4, stratum 10 and reference id "LOCL"
// (an undisciplined local clock, as ntpd's and chrony's local reference), origin = the request's
// transmit time, receive and transmit the daemon's clock at arrival and at sending.
std::string format_response(const packet& request, std::uint64_t receive, std::uint64_t transmit);
// A client's request (version 4, mode 3) with its transmit time: the answer's origin echoes it.
std::string format_request(std::uint64_t transmit);

// Nanoseconds since the Unix epoch <-> the NTP 32.32 timestamp.
std::uint64_t from_unix_ns(std::uint64_t unix_ns);
std::uint64_t to_unix_ns(std::uint64_t ntp);

}  // namespace vlessbench::ntp
