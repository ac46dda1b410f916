#include "core/wire/socks5_udp.hpp"

#include <stdexcept>

#include "core/wire/destination.hpp"

namespace vlessbench::socks5 {

namespace {
constexpr std::uint8_t atyp_ipv4 = 1;
constexpr std::uint8_t atyp_domain = 3;
constexpr std::uint8_t atyp_ipv6 = 4;
}  // namespace

std::string encode_udp_datagram(std::string_view host, std::uint16_t port, std::string_view data) {
  std::string out{0, 0, 0};
  std::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  if (!ec && addr.is_v4()) {
    out.push_back(static_cast<char>(atyp_ipv4));
    for (auto b : addr.to_v4().to_bytes()) out.push_back(static_cast<char>(b));
  } else if (!ec && addr.is_v6()) {
    out.push_back(static_cast<char>(atyp_ipv6));
    for (auto b : addr.to_v6().to_bytes()) out.push_back(static_cast<char>(b));
  } else {
    if (host.empty() || host.size() > 255) throw std::invalid_argument("socks5: domain must be 1-255 bytes");
    out.push_back(static_cast<char>(atyp_domain));
    out.push_back(static_cast<char>(host.size()));
    out.append(host);
  }
  out.push_back(static_cast<char>(port >> 8));
  out.push_back(static_cast<char>(port & 0xff));
  out.append(data);
  return out;
}

parse_result<udp_datagram> parse_udp_datagram(std::string_view m) {
  parse_result<udp_datagram> r;
  auto refuse = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(m[i]); };
  if (m.size() < 4) return refuse("short_header");
  if (byte(0) != 0 || byte(1) != 0) return refuse("bad_reserved");
  if (byte(2) != 0) return refuse("fragmented");
  std::size_t at = 4;
  switch (byte(3)) {
    case atyp_ipv4: {
      if (m.size() < at + 4 + 2) return refuse("short_header");
      r.value.host = address_from_bytes(m.substr(at, 4))->to_string();
      at += 4;
      break;
    }
    case atyp_ipv6: {
      if (m.size() < at + 16 + 2) return refuse("short_header");
      r.value.host = address_from_bytes(m.substr(at, 16))->to_string();
      at += 16;
      break;
    }
    case atyp_domain: {
      if (m.size() < at + 1) return refuse("short_header");
      const std::size_t len = byte(at);
      if (len == 0) return refuse("empty_domain");
      if (m.size() < at + 1 + len + 2) return refuse("short_header");
      r.value.host = std::string(m.substr(at + 1, len));
      at += 1 + len;
      break;
    }
    default: return refuse("bad_address_type");
  }
  r.value.port = static_cast<std::uint16_t>(byte(at) << 8 | byte(at + 1));
  at += 2;
  r.value.data = m.substr(at);
  r.status = parse_status::complete;
  r.consumed = at;
  return r;
}

}  // namespace vlessbench::socks5
