#pragma once
// Addresses as text and as values, in one place: the one HOST:PORT parser (config listeners,
// share links, the runner's paths and target, the load generator), the one CIDR parser (the
// config's [destinations] allow) and one normal form for IP
// addresses, so that the same host never compares unequal to itself: an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) is the IPv4 address, and an IPv6 scope id is dropped (addresses compare as bytes).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <asio/ip/address.hpp>
#include <asio/ip/tcp.hpp>

namespace vlessbench {

// ::ffff:a.b.c.d -> a.b.c.d; other addresses unchanged (without an IPv6 scope id).
asio::ip::address unmapped(const asio::ip::address& a);

// What a host may be: a name or an address (a client resolves it when it dials), or an address
// literal only (a listener: the bound address must not depend on DNS at reload time).
enum class host_rule { name_or_address, address_only };

// Whether port 0 is a value: a listener written HOST:0 takes the port the kernel picks when it
// binds (docs/configuration.md); a port a client dials is never 0.
enum class port_zero { refused, allowed };

struct host_port {
  std::string host;  // without brackets
  std::uint16_t port = 0;
  bool operator==(const host_port&) const = default;
};

// "HOST:PORT" or "[IPv6]:PORT": IPv6 only in brackets (and then a valid IPv6 address), port a
// decimal number 1..65535 (0..65535 with port_zero::allowed; leading zeros allowed). nullopt with a reason that names
// what is wrong
// ("port out of range", "IPv6 addresses need brackets, e.g. [::1]:8443", ...); callers add which
// value it was.
std::optional<host_port> parse_host_port(std::string_view text, host_rule rule, std::string& reason,
                                         port_zero zero = port_zero::refused);
// "host:port", IPv6 in brackets: the inverse of parse_host_port.
std::string format_host_port(std::string_view host, std::uint16_t port);

// "127.0.0.1:8080", "[::1]:8443" -> endpoint (address_only); returns false with a reason on error.
// A listener's endpoint passes port_zero::allowed.
bool parse_endpoint(std::string_view text, asio::ip::tcp::endpoint& out, std::string& reason,
                    port_zero zero = port_zero::refused);
std::string format_endpoint(const asio::ip::tcp::endpoint& ep);

// A host name as a Host header or a config list carries it: a DNS name (letters, digits, '-',
// labels of 1..63, at most 253 in all) or an IP address literal (IPv6 with or without brackets).
// Lower case, without a trailing dot; an address in its normal form (unmapped). nullopt with a
// reason otherwise.
std::optional<std::string> normalize_host_name(std::string_view text, std::string& reason);

// An HTTP Host header value (RFC 9110 7.2: uri-host [":" port]): "name", "name:80", "1.2.3.4:80",
// "[::1]:80". The port, when present, is 1..65535 but not returned: through a forward (ssh -L) it
// is not the listener's. address is set when the host is an IP literal.
struct host_header {
  std::string host;  // normalize_host_name's form
  std::optional<asio::ip::address> address;
};
std::optional<host_header> parse_host_header(std::string_view value, std::string& reason);

// An IP network in CIDR form ("10.0.0.0/8", "fd00::/8"); a bare address is a single host.
struct ip_network {
  asio::ip::address address;  // host bits are zero
  unsigned prefix = 0;        // 0..32 (IPv4) or 0..128 (IPv6)
  // Same family only: an IPv4 network never matches an IPv6 address (map ::ffff:a.b.c.d first).
  bool contains(const asio::ip::address& a) const;
  bool operator==(const ip_network&) const = default;
};

// "10.0.0.0/8", "::/0", "192.0.2.7" (a /32) -> network; false with a reason on error (including
// host bits set past the prefix, which usually means a typo).
bool parse_ip_network(std::string_view text, ip_network& out, std::string& reason);
std::string format_ip_network(const ip_network& n);

}  // namespace vlessbench
