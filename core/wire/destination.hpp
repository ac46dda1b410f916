#pragma once
// One destination value for every codec that carries one (the VLESS request header, Mux.Cool and
// XUDP frames, SOCKS5 UDP datagrams) and for the one dialer that connects to it
// (server/upstream_dialer.hpp), with one bytes -> address function (as Xray's net.Destination).
// The numbering is the wire's: VLESS and Mux.Cool both write 1 IPv4, 2 domain, 3 IPv6, and
// Mux.Cool 1 TCP, 2 UDP; SOCKS5 maps its own address types onto these.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <asio/ip/address.hpp>

namespace vlessbench {

enum class address_type : std::uint8_t { ipv4 = 1, domain = 2, ipv6 = 3 };
enum class network : std::uint8_t { tcp = 1, udp = 2 };

struct destination {
  network net = network::tcp;
  std::uint16_t port = 0;
  address_type type = address_type::ipv4;
  std::string address;  // IPv4/IPv6: the raw 4 or 16 bytes (network order); domain: the name
  bool operator==(const destination&) const = default;
};

// The one raw bytes -> IP address: 4 bytes an IPv4, 16 bytes an IPv6 address; nullopt otherwise.
std::optional<asio::ip::address> address_from_bytes(std::string_view raw);

// The IP address of an IPv4/IPv6 destination; nullopt for a domain (or bytes of the wrong length).
std::optional<asio::ip::address> ip_of(const destination& d);

// "1.2.3.4:80", "[::1]:53", "name:443": a destination as the log writes it.
std::string format_destination(const destination& d);

// host:port as a destination: an IP literal (IPv6 without brackets) travels as an address (an
// IPv4-mapped IPv6 one as IPv6, as written), anything else as a name.
destination destination_for_host(std::string_view host, std::uint16_t port, network net = network::tcp);

// An address as a destination; IPv4-mapped IPv6 addresses as IPv4 (what a reply names).
destination destination_of(const asio::ip::address& a, std::uint16_t port, network net);

}  // namespace vlessbench
