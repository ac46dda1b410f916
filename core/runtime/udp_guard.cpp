#include "core/runtime/udp_guard.hpp"

#include <algorithm>
#include <array>

#include "core/wire/net_address.hpp"

namespace vlessbench {

bool is_reflector_port(std::uint16_t port) {
  static constexpr std::array<std::uint16_t, 23> ports = {
      0, 7, 9, 13, 17, 19, 37, 53, 69, 111, 123, 137, 138, 161, 162, 389, 500, 514, 520, 1900, 3702, 5353, 11211};
  return std::find(ports.begin(), ports.end(), port) != ports.end();
}

std::string_view udp_source_refusal(const asio::ip::udp::endpoint& peer, const asio::ip::udp::endpoint& local,
                                    const std::vector<std::uint16_t>& own_ports) {
  if (is_reflector_port(peer.port())) return "reflector_port";
  if (std::find(own_ports.begin(), own_ports.end(), peer.port()) != own_ports.end()) {
    const auto from = unmapped(peer.address());
    if (from.is_loopback() || from == unmapped(local.address())) return "own_listener";
  }
  return {};
}

bool is_udp_echo_answer(std::string_view datagram) {
  return datagram.find("\nVLESSBENCH-UDP") != std::string_view::npos;
}

bool is_dns_response(std::string_view message) {
  return message.size() >= 3 && (static_cast<unsigned char>(message[2]) & 0x80U) != 0;
}

}  // namespace vlessbench
