#include "runner/proxy_protocol.hpp"

#include <algorithm>

#include <asio/ip/address.hpp>

#include "core/wire/destination.hpp"

namespace vlessbench::runner {

namespace {

constexpr std::uint8_t socks_version = 5;
constexpr std::uint8_t method_no_auth = 0;
constexpr std::uint8_t cmd_connect = 1;
constexpr std::uint8_t cmd_udp_associate = 3;
constexpr std::uint8_t atyp_ipv4 = 1, atyp_domain = 3, atyp_ipv6 = 4;

std::string_view rep_reason(std::uint8_t rep) {
  switch (rep) {
    case 1: return "socks5: general server failure";
    case 2: return "socks5: connection not allowed by ruleset";
    case 3: return "socks5: network unreachable";
    case 4: return "socks5: host unreachable";
    case 5: return "socks5: connection refused";
    case 6: return "socks5: TTL expired";
    case 7: return "socks5: command not supported";
    case 8: return "socks5: address type not supported";
    default: return "socks5: unassigned reply code";
  }
}

}  // namespace

std::string format_connect_request(std::string_view authority) {
  std::string r;
  r.reserve(64 + 2 * authority.size());
  r.append("CONNECT ").append(authority).append(" HTTP/1.1\r\nHost: ").append(authority);
  r.append("\r\n\r\n");
  return r;
}

std::string socks5_greeting() {
  return std::string{static_cast<char>(socks_version), 1, static_cast<char>(method_no_auth)};
}

parse_result<bool> parse_socks5_method_reply(std::string_view buffer) {
  parse_result<bool> r;
  if (buffer.size() < 2) return r;
  r.consumed = 2;
  if (static_cast<std::uint8_t>(buffer[0]) != socks_version) {
    r.status = parse_status::invalid;
    r.reason = "socks5: server is not SOCKS version 5";
  } else if (static_cast<std::uint8_t>(buffer[1]) != method_no_auth) {
    r.status = parse_status::invalid;
    r.reason = "socks5: server requires authentication";
  } else {
    r.status = parse_status::complete;
    r.value = true;
  }
  return r;
}

std::string socks5_connect_request(std::string_view host, std::uint16_t port) {
  std::string r{static_cast<char>(socks_version), static_cast<char>(cmd_connect), 0};
  std::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  if (!ec && addr.is_v4()) {
    r.push_back(static_cast<char>(atyp_ipv4));
    for (auto b : addr.to_v4().to_bytes()) r.push_back(static_cast<char>(b));
  } else if (!ec && addr.is_v6()) {
    r.push_back(static_cast<char>(atyp_ipv6));
    for (auto b : addr.to_v6().to_bytes()) r.push_back(static_cast<char>(b));
  } else {
    // Longer names cannot be expressed; the length byte would wrap.
    const auto name = host.substr(0, 255);
    r.push_back(static_cast<char>(atyp_domain));
    r.push_back(static_cast<char>(name.size()));
    r.append(name);
  }
  r.push_back(static_cast<char>(port >> 8));
  r.push_back(static_cast<char>(port & 0xff));
  return r;
}

parse_result<bool> parse_socks5_connect_reply(std::string_view buffer) {
  parse_result<bool> r;
  if (buffer.size() < 5) return r;  // through ATYP and the first address byte
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(buffer[i]); };
  if (byte(0) != socks_version) {
    r.status = parse_status::invalid;
    r.reason = "socks5: bad reply version";
    return r;
  }
  std::size_t addr_len = 0;
  switch (byte(3)) {
    case atyp_ipv4: addr_len = 4; break;
    case atyp_ipv6: addr_len = 16; break;
    case atyp_domain: addr_len = 1 + byte(4); break;
    default:
      r.status = parse_status::invalid;
      r.reason = "socks5: bad address type in reply";
      return r;
  }
  const std::size_t total = 4 + addr_len + 2;
  if (byte(1) != 0) {
    // A failure reply may be cut short by the server closing; the code is what matters.
    r.status = parse_status::invalid;
    r.reason = rep_reason(byte(1));
    r.consumed = std::min(total, buffer.size());
    return r;
  }
  if (buffer.size() < total) return r;
  r.status = parse_status::complete;
  r.value = true;
  r.consumed = total;
  return r;
}

std::string socks5_udp_associate_request() {
  return std::string{static_cast<char>(socks_version),
                     static_cast<char>(cmd_udp_associate),
                     0,
                     static_cast<char>(atyp_ipv4),
                     0,
                     0,
                     0,
                     0,
                     0,
                     0};
}

socks5_bound socks5_reply_bound(std::string_view complete_reply) {
  const std::string_view r = complete_reply;
  socks5_bound b;
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(r[i]); };
  std::size_t at = 4;
  if (byte(3) == atyp_ipv4) {
    b.host = address_from_bytes(r.substr(at, 4))->to_string();
    at += 4;
  } else if (byte(3) == atyp_ipv6) {
    b.host = address_from_bytes(r.substr(at, 16))->to_string();
    at += 16;
  } else {
    b.host = std::string(r.substr(at + 1, byte(at)));
    at += 1 + byte(at);
  }
  b.port = static_cast<std::uint16_t>(byte(at) << 8 | byte(at + 1));
  return b;
}

}  // namespace vlessbench::runner
