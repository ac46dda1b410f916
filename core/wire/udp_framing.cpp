#include "core/wire/udp_framing.hpp"

#include <stdexcept>

namespace vlessbench::vless {

parse_result<std::string_view> parse_udp_packet(std::string_view buffer, std::size_t cap) {
  parse_result<std::string_view> r;
  if (buffer.size() < udp_length_bytes) return r;
  const std::size_t len =
      (static_cast<std::size_t>(static_cast<unsigned char>(buffer[0])) << 8) | static_cast<unsigned char>(buffer[1]);
  if (len > cap) {
    r.status = parse_status::invalid;
    r.reason = "udp_packet_too_large";
    return r;
  }
  if (buffer.size() - udp_length_bytes < len) return r;
  r.status = parse_status::complete;
  r.value = buffer.substr(udp_length_bytes, len);
  r.consumed = udp_length_bytes + len;
  return r;
}

void encode_udp_packet(std::string& out, std::string_view datagram) {
  if (datagram.size() > max_udp_datagram) throw std::length_error("UDP datagram over 65507 bytes");
  char prefix[udp_length_bytes];
  put_udp_length(prefix, datagram.size());
  out.append(prefix, udp_length_bytes);
  out.append(datagram);
}

}  // namespace vlessbench::vless
