#pragma once
// smux frames (xtaci/smux, sing-mux's protocol 0), parsed from bytes, no sockets. Layout, from smux's
// public description:
//
//   u8 version (1 or 2) | u8 cmd | u16 length | u32 stream id   (little-endian) | length bytes
//   cmd: 0 SYN (open), 1 FIN (close), 2 PSH (data), 3 NOP, 4 UPD (version 2 only: u32 consumed,
//        u32 window; the receiver's flow control)
//
// parse_frame reads one whole frame; its data is a view into the input. encode_frame writes one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench::smux {

enum class cmd : std::uint8_t { syn = 0, fin = 1, psh = 2, nop = 3, upd = 4 };
inline constexpr std::size_t header_size = 8;
inline constexpr std::uint32_t initial_window = 262'144;  // version 2: what a peer may send before an UPD

struct frame {
  std::uint8_t version = 1;
  smux::cmd c = cmd::nop;
  std::uint32_t sid = 0;
  std::string_view data;                   // PSH (and SYN/FIN/NOP, which carry none in practice)
  std::uint32_t consumed = 0, window = 0;  // UPD
};

// Reasons: "bad_version", "unknown_cmd", "upd_in_version_1", "bad_upd_length".
parse_result<frame> parse_frame(std::string_view in);

// Appends one frame; data at most 65535 bytes.
void encode_frame(std::string& out, std::uint8_t version, cmd c, std::uint32_t sid, std::string_view data = {});
void encode_upd(std::string& out, std::uint32_t sid, std::uint32_t consumed, std::uint32_t window);

}  // namespace vlessbench::smux
