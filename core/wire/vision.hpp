#pragma once
// XTLS Vision, flow "xtls-rprx-vision" (docs/sessions.md "Vision"): the padding both ends put
// around the first writes of a VLESS-over-TLS stream, and the detection of a TLS handshake inside
// it that lets both ends stop encrypting twice. Pure: bytes in, bytes out, no sockets.
//
// Wire form, each direction on its own: the first frame starts with the user's 16-byte UUID;
// every frame is command(1) · content length(2, big-endian) · padding length(2) · content ·
// padding (zeros). Commands: 0 continue (another frame follows), 1 end (the stream goes on
// unpadded inside the TLS), 2 direct (the stream goes on unpadded and, after the TLS record that
// carried this frame, raw on the TCP connection beneath the TLS). The Vision response header of
// the server (VLESS version · addons length) precedes its first frame unpadded.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "core/wire/uuid.hpp"

namespace vlessbench::vision {

inline constexpr std::string_view flow_name = "xtls-rprx-vision";

enum class command : std::uint8_t { pad_continue = 0, pad_end = 1, pad_direct = 2 };

inline constexpr std::size_t frame_header_size = 5;  // command, content length, padding length
// Xray pads within its 8 KiB buffers (8192 - 21 bytes of UUID and header); no sender pads more.
inline constexpr std::size_t max_padding = 8192 - 21;
// Frames of the padded part a receiver takes before it calls the stream unended: senders pad
// their first handful of writes (eight packets of TLS detection) or the handshake's records.
inline constexpr std::size_t max_padded_frames = 1024;
// A sender's content per frame: its padding (under 256 bytes past 900 of content) still fits
// Xray's 8 KiB buffer.
inline constexpr std::size_t max_chunk = 8192 - 21 - 256;

// What both directions of one connection learn of the traffic inside it: a TLS ClientHello, the
// ServerHello's version and cipher. Fed with each direction's payload (unpadded) until
// `packets_left` runs out or the ServerHello decides.
struct tls_filter {
  int packets_left = 8;
  bool is_tls = false;          // a ClientHello or a ServerHello seen
  bool tls12_or_above = false;  // a ServerHello seen
  bool tls13 = false;           // the ServerHello carries supported_versions = TLS 1.3
  bool direct_ok = false;       // TLS 1.3 with a cipher other than CCM_8: direct copy may begin
  std::uint16_t cipher = 0;
  std::int32_t server_hello_left = -1;  // bytes of the ServerHello record still to look at

  bool filtering() const { return packets_left > 0; }
  void observe(std::string_view packet);
};

// The receiving half for one direction. feed() takes the bytes as they arrive, writes the
// content to out (which may be in itself: out never runs ahead of in) and says how far it got.
class unpadder {
 public:
  enum class state { uuid, header, content, padding, plain, direct, failed };
  explicit unpadder(const uuid_bytes& uuid) : uuid_(uuid) {}

  struct result {
    std::size_t out = 0;     // content bytes written
    std::string_view error;  // set (a static reason) when the input broke the format
  };
  result feed(const char* in, std::size_t n, char* out);

  state where() const { return state_; }
  bool padded() const { return state_ != state::plain && state_ != state::direct; }
  bool direct() const { return state_ == state::direct; }
  std::uint64_t frames() const { return frames_; }
  std::uint64_t padding_bytes() const { return padding_total_; }  // padding, headers and UUID

 private:
  uuid_bytes uuid_;
  state state_ = state::uuid;
  std::size_t pos_ = 0;  // bytes of the UUID or frame header taken
  std::uint8_t header_[frame_header_size]{};
  std::size_t content_left_ = 0;
  std::size_t padding_left_ = 0;
  std::uint64_t frames_ = 0;
  std::uint64_t padding_total_ = 0;
};

// The sending half for one direction: frames each write as Xray's writer does, ending the
// padding at the first TLS application data (direct when the ServerHello allowed it), or after
// the detection gave up on TLS.
class padder {
 public:
  padder(const uuid_bytes& uuid, std::uint64_t seed) : uuid_(uuid), rng_(seed) {}

  struct written {
    bool direct = false;  // the last frame said direct: later bytes go beneath the TLS
  };
  // Appends the wire form of one write's content to out. An empty content is one empty frame
  // with long padding (what a client sends when it has nothing to say after the header).
  written pad(tls_filter& filter, std::string_view content, std::string& out);

  bool padding() const { return padding_; }
  std::uint64_t padding_bytes() const { return padding_total_; }

 private:
  void frame(std::string& out, command c, std::string_view content, bool long_padding);

  uuid_bytes uuid_;
  std::mt19937_64 rng_;
  bool uuid_sent_ = false;
  bool padding_ = true;
  std::uint64_t padding_total_ = 0;
};

}  // namespace vlessbench::vision
