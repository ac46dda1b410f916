#pragma once
// yamux frames (hashicorp/yamux, sing-mux's protocol 1), parsed from bytes, no sockets. Layout, from
// yamux's public spec.md:
//
//   u8 version (0) | u8 type | u16 flags | u32 stream id | u32 length   (big-endian)
//   type:  0 Data (length bytes follow), 1 Window Update (length: the window's increase),
//          2 Ping (stream 0; length: an opaque value the ACK echoes), 3 Go Away (stream 0; length:
//          0 normal, 1 protocol error, 2 internal error)
//   flags: 1 SYN (opens a stream), 2 ACK (accepts it; a ping's answer), 4 FIN (half-close), 8 RST
//   every stream may receive 256 KiB before its receiver's first Window Update
//
// parse_frame reads one whole frame (a Data frame with its payload); data is a view into the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::yamux {

enum class type : std::uint8_t { data = 0, window_update = 1, ping = 2, go_away = 3 };
inline constexpr std::uint16_t flag_syn = 1, flag_ack = 2, flag_fin = 4, flag_rst = 8;
inline constexpr std::size_t header_size = 12;
inline constexpr std::uint32_t initial_window = 256 * 1024;

struct frame {
  yamux::type t = type::data;
  std::uint16_t flags = 0;
  std::uint32_t stream = 0;
  std::uint32_t length = 0;  // Data: the payload's; else the value
  std::string_view data;     // Data only
};

// A Data frame longer than max_data is refused before its payload is read ("data_too_long": a
// receiver's window bounds it). Reasons: "bad_version", "unknown_type", "unknown_flags",
// "data_too_long", "stream_zero" (Data/Window Update), "session_frame_on_stream" (Ping/Go Away).
parse_result<frame> parse_frame(std::string_view in, std::uint32_t max_data = initial_window);

// Appends one header and, for Data, the payload (its length is the header's).
void encode_frame(std::string& out, type t, std::uint16_t flags, std::uint32_t stream, std::uint32_t length,
                  std::string_view data = {});

}  // namespace vlessbench::yamux
