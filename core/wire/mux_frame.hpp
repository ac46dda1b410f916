#pragma once
// Mux.Cool frames (VLESS command 3; the XUDP variant included), parsed from bytes, no sockets.
// Layout, from the protocol's public description (v2fly/Xray "Mux.Cool protocol"):
//
//   u16 metadata length L | metadata (L bytes) | [u16 data length N | data (N bytes)]   (BE)
//   metadata: u16 sub-connection id | u8 status | u8 option | [target] | [u64 XUDP global id]
//   target:   u8 network (1 TCP, 2 UDP) | u16 port | u8 address type (1 IPv4, 2 domain,
//             3 IPv6) | address (4 bytes, u8 length + name, 16 bytes)
//   status:   1 New (target required), 2 Keep (XUDP: a UDP packet's own target may follow),
//             3 End, 4 KeepAlive
//   option:   0x01 data follows the metadata, 0x02 error (End: the sub-connection failed)
//
// parse_mux_frame reads one whole frame; its data is a view into the input. encode_mux_frame
// writes one. Both are canonical: a complete frame re-encodes to the bytes it was read from.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/destination.hpp"
#include "core/wire/parse_result.hpp"

namespace vlessbench::mux {

enum class status : std::uint8_t { new_sub = 1, keep = 2, end = 3, keep_alive = 4 };
// A frame's target is the one destination value (core/wire/destination.hpp).
using vlessbench::address_type;
using vlessbench::network;
using target = vlessbench::destination;

inline constexpr std::uint8_t option_data = 0x01;
inline constexpr std::uint8_t option_error = 0x02;
// The longest metadata a valid frame has: id, status, option, a target with a 255-byte name,
// a global id (4 + 1 + 2 + 1 + 1 + 255 + 8).
inline constexpr std::size_t max_metadata = 272;

struct frame {
  std::uint16_t id = 0;
  mux::status st = status::keep;
  std::uint8_t option = 0;
  std::optional<mux::target> dest;                       // New: always; Keep: XUDP only
  std::optional<std::array<std::uint8_t, 8>> global_id;  // XUDP New (UDP) only
  std::string_view data;                                 // into the parsed input
  bool has_data() const { return (option & option_data) != 0; }
  bool error() const { return (option & option_error) != 0; }
};

// One whole frame; consumed = its size. need_more until the frame is all there. Reasons:
// "metadata_too_short", "metadata_too_long", "unknown_status", "unknown_option_bits",
// "new_without_target", "unknown_network", "unknown_address_type", "empty_domain",
// "port_zero", "global_id_on_tcp", "bad_metadata_length".
parse_result<frame> parse_mux_frame(std::string_view in);

// Appends one frame (data only when f.option has option_data; at most 65535 bytes of it).
void encode_mux_frame(std::string& out, const frame& f);

// "1.2.3.4:80", "[::1]:53", "name:443": the target as the log writes a destination.
inline std::string format_target(const target& t) { return format_destination(t); }

}  // namespace vlessbench::mux
