#pragma once
// The gRPC ("gun") transport's message framing, from bytes (no sockets): what
// server/transport's grpc streams and the one VLESS client
// (core/client/vless_client.hpp) put inside HTTP/2 DATA frames.
//
// gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md) frames each message as
//   Compressed-Flag (1 byte, 0 or 1) | Message-Length (4 bytes, big-endian) |
//   Message
// and the message here is one of two protobuf messages (protobuf "Encoding"
// documentation):
//   Tun:      Hunk      { bytes data = 1; }           one chunk of the VLESS
//   stream TunMulti: MultiHunk { repeated bytes data = 1; }  several chunks
// Field 1 with wire type 2 (LEN) has the tag byte 0x0a, then a varint length,
// then the bytes. So Hunk{"abc"} on the wire is 00 00000005 0a 03 61 62 63.
//
// Rules the decoder applies (the VLESS stream is bytes: message boundaries
// disappear):
// - the compressed flag must be 0 (no grpc-encoding is ever negotiated):
// "compressed_message";
//   any other flag value: "bad_compressed_flag";
// - a message longer than the cap: "message_too_large";
// - unknown fields are skipped as protobuf parsers do (varint, I64, LEN, I32),
// groups (wire types
//   3, 4) and wire types 6, 7 are refused: "group_wire_type", "bad_wire_type";
//   field number 0: "bad_field_number"; field 1 with a wire type other than
//   LEN: "data_wrong_wire_type";
// - a varint longer than 10 bytes: "varint_too_long"; a field that runs past
// its message's end:
//   "field_overruns_message";
// - Hunk's data is a singular field: protobuf lets the last occurrence win,
// which a streaming
//   decoder (it hands bytes on before the message ends) cannot honour, so a
//   second occurrence in one Tun message is refused: "hunk_data_repeated".
//   MultiHunk's occurrences are concatenated.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench::gun {

enum class message_kind { hunk, multi_hunk };  // the Tun and TunMulti methods

inline constexpr std::size_t prefix_bytes = 5;
// Prefix, tag and the longest varint of a 32-bit length: the most
// encode_hunk_header writes.
inline constexpr std::size_t max_header_bytes = prefix_bytes + 1 + 5;
inline constexpr std::size_t default_max_message = 1u << 20;

// Writes the gRPC prefix and the Hunk field header for data_len bytes of data
// into out (max_header_bytes); returns its size. The data follows it. data_len
// 0: an empty message (proto3 omits an empty field), 5 bytes.
std::size_t encode_hunk_header(char* out, std::size_t data_len);
// A whole Tun message carrying data.
std::string encode_hunk(std::string_view data);
// A whole TunMulti message carrying the chunks (each one a field, empty ones
// included).
std::string encode_multi_hunk(const std::vector<std::string_view>& chunks);

// One whole gRPC message at the front of in: complete with its data chunks
// (views into in) and consumed = 5 + length; need_more until all of it is
// there; invalid(reason) by the rules above.
struct message {
  std::vector<std::string_view> chunks;
};
parse_result<message> parse_message(std::string_view in, message_kind kind,
                                    std::size_t max_message = default_max_message);

// The same rules over a stream of DATA bytes, arriving in any pieces: data
// bytes are handed on as they arrive, so nothing but a partial prefix or varint
// (at most 10 bytes) is held.
class stream_decoder {
 public:
  explicit stream_decoder(message_kind kind, std::size_t max_message = default_max_message)
      : kind_(kind), max_message_(max_message) {}

  struct step {
    std::size_t consumed = 0;  // bytes of the input taken (all of it unless reason is set)
    std::string_view reason;   // non-empty: a violation; nothing more may be decoded
  };
  // Decodes in, appending the data bytes found to out.
  step decode(std::string_view in, std::string& out);
  // True between messages: the stream may end here (a half message at the end
  // is truncated).
  bool at_boundary() const { return state_ == state::prefix && prefix_used_ == 0; }
  bool failed() const { return !failure_.empty(); }
  std::uint64_t messages() const { return messages_; }

 private:
  enum class state { prefix, tag, length, data, skip_varint, skip_bytes };
  std::string_view fail(std::string_view why) { return failure_ = why; }
  void end_field();
  std::string_view take_varint(unsigned char byte, bool& done);
  std::string_view start_field(std::uint64_t tag);

  message_kind kind_;
  std::size_t max_message_;
  state state_ = state::prefix;
  std::array<unsigned char, prefix_bytes> prefix_{};
  std::size_t prefix_used_ = 0;
  std::uint64_t left_ = 0;    // bytes of the current message not yet decoded
  std::uint64_t varint_ = 0;  // the varint being read
  unsigned varint_bytes_ = 0;
  std::uint32_t field_ = 0;  // the field whose length is being read
  std::uint64_t field_left_ = 0;
  bool data_seen_ = false;  // field 1 came already in this message
  std::string_view failure_;
  std::uint64_t messages_ = 0;
};

}  // namespace vlessbench::gun
