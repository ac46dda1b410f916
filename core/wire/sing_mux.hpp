#pragma once
// sing-mux (sing-box's and mihomo's `multiplex` / `smux:`), the parts that are not a stream
// multiplexer: the session request that opens the VLESS payload, each stream's request and response
// status, the UDP packet framing inside a stream, and the padding of the first records. Pure
// functions over bytes; the multiplexers are core/wire/smux_frame.hpp and core/wire/yamux_frame.hpp,
// the framing of the sub-connection engine server/sing_mux_framing.hpp. Layout, learnt from
// sing-mux's public sources (docs/sessions.md "sing-mux"):
//
//   session request: u8 version (0 or 1) | u8 protocol (0 smux, 1 yamux, 2 h2mux)
//                    | version 1: u8 padding (0/1) | padding 1: u16 length | length bytes   (BE)
//   stream request:  u16 flags (1 UDP, 2 UDP with an address per packet) | socks address
//   socks address:   u8 type (1 IPv4, 3 domain, 4 IPv6) | address (4, u8 length + name, 16) | u16 port
//   stream response: u8 status: 0 success, then the stream's data; 1 error, then a uvarint-length message
//   UDP packet:      [socks address, flag 2 only] | u16 length | payload
//   padding (padding 1): the first 16 records each way: u16 data length | u16 padding length | data | padding
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/mux_frame.hpp"
#include "core/wire/parse_result.hpp"

namespace vlessbench::sing_mux {

// The destination the VLESS request names for sing-mux (port 444).
inline constexpr std::string_view domain = "sp.mux.sing-box.arpa";

enum class protocol : std::uint8_t { smux = 0, yamux = 1, h2mux = 2 };
std::string_view to_string(protocol p);

struct request {
  std::uint8_t version = 0;
  sing_mux::protocol proto = protocol::smux;
  bool padding = false;
};
// consumed includes the padding bytes. Reasons: "unknown_version", "unknown_protocol",
// "bad_padding_flag".
parse_result<request> parse_request(std::string_view in);
std::string encode_request(const request& r, std::uint16_t padding_length = 0);

inline constexpr std::uint16_t flag_udp = 1;
inline constexpr std::uint16_t flag_addr = 2;

struct stream_request {
  mux::target dest;          // net: udp with flag_udp
  bool packet_addr = false;  // UDP: every packet names its own destination
};
// Reasons: "unknown_flags", "addr_without_udp", "unknown_address_type", "empty_domain".
parse_result<stream_request> parse_stream_request(std::string_view in);
std::string encode_stream_request(const stream_request& r);

// A socks address (type, address, port) into t (net unchanged). Reasons as parse_stream_request's.
parse_result<mux::target> parse_socks_address(std::string_view in);
void encode_socks_address(std::string& out, const mux::target& t);

inline constexpr std::uint8_t status_success = 0;
inline constexpr std::uint8_t status_error = 1;
// status_error and the message (cut at 255 bytes).
void encode_stream_error(std::string& out, std::string_view message);

struct udp_packet {
  std::optional<mux::target> dest;  // packet_addr streams only
  std::string_view data;            // into the input
};
// One packet of a UDP stream; need_more until it is whole. Reasons as parse_socks_address's.
parse_result<udp_packet> parse_udp_packet(std::string_view in, bool packet_addr);
void encode_udp_packet(std::string& out, const mux::target* dest, std::string_view data);

inline constexpr unsigned padded_records = 16;

// The padded first records of the client's stream, removed incrementally: feed bytes, get the data.
class unpadder {
 public:
  // Appends the data of in to out. Never fails: any u16 pair is a record.
  void feed(std::string_view in, std::string& out);
  bool done() const { return records_ >= padded_records && data_left_ == 0 && pad_left_ == 0; }

 private:
  unsigned records_ = 0;
  std::string head_;  // a record header cut short
  std::size_t data_left_ = 0, pad_left_ = 0;
};

// One padded record of data (at most 65535 bytes) with padding_length zero bytes.
void encode_padded_record(std::string& out, std::string_view data, std::uint16_t padding_length);

}  // namespace vlessbench::sing_mux
