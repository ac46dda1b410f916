#include "server/destination_policy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace vlessbench {

machine_address_read read_machine_addresses() {
  machine_address_read result;
  auto& out = result.addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    result.error = errno;
    return result;
  }
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin{};
      std::memcpy(&sin, i->ifa_addr, sizeof sin);
      out.emplace_back(asio::ip::address_v4(ntohl(sin.sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin6{};
      std::memcpy(&sin6, i->ifa_addr, sizeof sin6);
      asio::ip::address_v6::bytes_type bytes{};
      std::memcpy(bytes.data(), &sin6.sin6_addr, bytes.size());
      out.emplace_back(asio::ip::address_v6(bytes));
    }
  }
  ::freeifaddrs(list);
  return result;
}

address_list machine_addresses() { return read_machine_addresses().addresses; }

std::string_view reject_reason(destination_verdict v) {
  switch (v) {
    case destination_verdict::allowed: return "";
    case destination_verdict::not_allowed: return "dest_not_allowed";
    case destination_verdict::vless_listener: return "dest_is_vless_listener";
  }
  return "dest_not_allowed";
}

namespace {

// Any address that reaches this machine: loopback, the unspecified address (connect() to
// 0.0.0.0 / :: goes to the local host), a listener's own address, or an interface address.
// Whatever address the listener itself is bound to, another local address on the same port is
// refused too: conservative, and a nested session needs no particular address.
bool own_vless_port(const config& cfg, const asio::ip::address& addr, unsigned short port,
                    const std::function<address_list()>& machine) {
  bool port_matches = false;
  for (const auto& v : cfg.vless) {
    if (v.listen.port() != port) continue;
    if (unmapped(v.listen.address()) == addr) return true;
    port_matches = true;
  }
  if (!port_matches) return false;
  if (addr.is_loopback() || addr.is_unspecified()) return true;
  const auto local = machine();
  return std::any_of(local.begin(), local.end(), [&](const asio::ip::address& a) { return unmapped(a) == addr; });
}

// The addresses the daemon's own targets of proto listen on, at port.
std::vector<asio::ip::address> own_target_addresses(const config& cfg, unsigned short port, ip_protocol proto) {
  std::vector<asio::ip::address> out;
  if (proto == ip_protocol::tcp) {
    for (const auto& t : cfg.target)  // [[target]] and [[banner]]
      if (t.listen.port() == port) out.push_back(t.listen.address());
  } else {
    for (const auto& u : cfg.udp_target)
      if (u.listen.port() == port) out.push_back(u.listen.address());
  }
  for (const auto& d : cfg.dns)  // UDP and TCP on one port
    if (d.listen.port() == port) out.push_back(d.listen.address());
  return out;
}

bool allowed_by_policy(const config& cfg, const asio::ip::address& addr, unsigned short port, ip_protocol proto,
                       const std::function<address_list()>& machine) {
  if (addr.is_loopback()) return true;
  if (std::any_of(cfg.destinations.allow.begin(), cfg.destinations.allow.end(),
                  [&](const ip_network& n) { return n.contains(addr); }))
    return true;
  bool wildcard_target = false;
  for (const auto& a : own_target_addresses(cfg, port, proto)) {
    const auto listen = unmapped(a);
    if (!listen.is_unspecified()) {
      if (listen == addr) return true;
    } else if (listen.is_v4() == addr.is_v4()) {
      // A v6 wildcard listener is v6-only (the daemon sets IPV6_V6ONLY), so families must match.
      wildcard_target = true;
    }
  }
  if (!wildcard_target || addr.is_unspecified()) return false;
  const auto local = machine();
  return std::any_of(local.begin(), local.end(), [&](const asio::ip::address& a) { return unmapped(a) == addr; });
}

}  // namespace

destination_verdict check_destination(const config& cfg, const asio::ip::tcp::endpoint& dest,
                                      const std::function<address_list()>& machine, ip_protocol proto) {
  const auto addr = unmapped(dest.address());
  if (proto == ip_protocol::tcp && own_vless_port(cfg, addr, dest.port(), machine))
    return destination_verdict::vless_listener;
  return allowed_by_policy(cfg, addr, dest.port(), proto, machine) ? destination_verdict::allowed
                                                                   : destination_verdict::not_allowed;
}

}  // namespace vlessbench
