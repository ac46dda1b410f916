#pragma once
// RFC 6455 frames, parsed incrementally from bytes (no sockets): the WebSocket transport's
// framing (server/transport/ws_stream.hpp) and the one VLESS client's (core/client/vless_client.hpp).
//
// parse_frame_header reads one frame header (2-14 bytes). frame_decoder runs it over a byte
// stream: it unmasks data-frame payload in place and moves it to the front of the buffer (the
// VLESS stream is bytes, so message boundaries and fragmentation disappear), collects control
// frames (ping, pong, close) whole, and stops at the first protocol violation with a reason.
// No extension is ever negotiated, so RSV bits are violations; text frames are refused (VLESS
// travels in binary frames; a text frame would need UTF-8 validation to be accepted).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench::ws {

enum class opcode : std::uint8_t { continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10 };

using mask_key = std::array<std::uint8_t, 4>;

struct frame_header {
  bool fin = true;
  opcode op = opcode::binary;
  bool masked = false;
  mask_key mask{};
  std::uint64_t length = 0;
  bool operator==(const frame_header&) const = default;
};

inline constexpr std::size_t max_header_bytes = 14;
inline constexpr std::size_t max_control_payload = 125;
inline constexpr std::uint16_t close_normal = 1000, close_protocol_error = 1002, close_too_big = 1009;

struct frame_rules {
  bool masked = true;                  // client frames must be masked, server frames must not
  std::uint64_t max_frame = 1u << 20;  // a data frame's payload cap (bytes)
};

// One frame header; consumed = its size. Reasons: "rsv_bits_set", "unknown_opcode",
// "unmasked_client_frame", "masked_server_frame", "control_frame_fragmented",
// "control_frame_too_long", "frame_too_large", "non_minimal_length", "length_msb_set".
parse_result<frame_header> parse_frame_header(std::string_view in, const frame_rules& rules);

// Writes a frame header into out (max_header_bytes); returns its size. mask: null = unmasked.
std::size_t encode_frame_header(char* out, opcode op, bool fin, std::uint64_t length, const mask_key* mask);

// XORs data with key, the first byte being payload byte `offset` of its frame.
void apply_mask(char* data, std::size_t n, const mask_key& key, std::uint64_t offset);

// A whole control frame (payload unmasked).
struct control_frame {
  opcode op = opcode::ping;
  std::string payload;
};

// Status code and reason of a close frame's payload (RFC 6455 §5.5.1); 1005 when absent.
std::uint16_t close_code(std::string_view payload);

class frame_decoder {
 public:
  explicit frame_decoder(frame_rules rules) : rules_(rules) {}

  struct step {
    std::size_t payload = 0;  // data bytes now at data[0, payload)
    std::string_view reason;  // non-empty: a violation; nothing more may be decoded
  };
  // Decodes data[0, n) (the next bytes of the stream) in place. Control frames completed on the
  // way are appended to controls(); a partial header is kept inside (at most 13 bytes).
  step decode(char* data, std::size_t n);

  std::vector<control_frame>& controls() { return controls_; }
  bool close_received() const { return close_received_; }
  bool failed() const { return failed_; }
  // True when bytes of an unfinished frame header are held (a read must follow).
  bool mid_header() const { return head_used_ > 0; }

 private:
  frame_rules rules_;
  std::array<char, max_header_bytes> head_{};
  std::size_t head_used_ = 0;
  bool in_payload_ = false;
  frame_header cur_{};
  std::uint64_t done_ = 0;   // payload bytes of cur_ seen
  bool in_message_ = false;  // a fragmented data message is open (continuations expected)
  bool close_received_ = false;
  bool failed_ = false;
  std::string control_;  // payload of the control frame being read
  std::vector<control_frame> controls_;
};

}  // namespace vlessbench::ws
