#include "core/wire/destination.hpp"

#include <algorithm>

#include "core/wire/net_address.hpp"

namespace vlessbench {

std::optional<asio::ip::address> address_from_bytes(std::string_view raw) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(raw[i]); };
  if (raw.size() == 4) return asio::ip::address_v4({byte(0), byte(1), byte(2), byte(3)});
  if (raw.size() != 16) return std::nullopt;
  asio::ip::address_v6::bytes_type b{};
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = byte(i);
  return asio::ip::address_v6(b);
}

std::optional<asio::ip::address> ip_of(const destination& d) {
  if (d.type == address_type::domain) return std::nullopt;
  const std::size_t want = d.type == address_type::ipv4 ? 4 : 16;
  if (d.address.size() != want) return std::nullopt;
  return address_from_bytes(d.address);
}

std::string format_destination(const destination& d) {
  if (d.type == address_type::domain) return format_host_port(d.address, d.port);
  // Short bytes (never from a parser) read as zeros, as an address of the right length.
  std::string raw = d.address;
  raw.resize(d.type == address_type::ipv4 ? 4 : 16, '\0');
  return format_host_port(address_from_bytes(raw)->to_string(), d.port);
}

namespace {

template <class Bytes>
std::string raw_of(const Bytes& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

destination destination_for_host(std::string_view host, std::uint16_t port, network net) {
  destination d;
  d.net = net;
  d.port = port;
  std::error_code ec;
  const auto a = asio::ip::make_address(std::string(host), ec);
  if (ec) {
    d.type = address_type::domain;
    d.address = std::string(host);
  } else if (a.is_v4()) {
    d.type = address_type::ipv4;
    d.address = raw_of(a.to_v4().to_bytes());
  } else {
    d.type = address_type::ipv6;
    d.address = raw_of(a.to_v6().to_bytes());
  }
  return d;
}

destination destination_of(const asio::ip::address& a, std::uint16_t port, network net) {
  const asio::ip::address u = unmapped(a);
  destination d;
  d.net = net;
  d.port = port;
  d.type = u.is_v4() ? address_type::ipv4 : address_type::ipv6;
  d.address = u.is_v4() ? raw_of(u.to_v4().to_bytes()) : raw_of(u.to_v6().to_bytes());
  return d;
}

}  // namespace vlessbench
