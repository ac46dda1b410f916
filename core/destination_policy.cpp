#include "destination_policy.hpp"

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

bool destination_allowed(const config& cfg, const asio::ip::tcp::endpoint& dest,
                         const std::function<address_list()>& machine) {
  const auto addr = unmapped(dest.address());
  if (addr.is_loopback()) return true;
  if (std::any_of(cfg.destinations.allow.begin(), cfg.destinations.allow.end(),
                  [&](const ip_network& n) { return n.contains(addr); }))
    return true;
  bool wildcard_target = false;
  for (const auto& t : cfg.target) {
    if (t.listen.port() != dest.port()) continue;
    const auto listen = unmapped(t.listen.address());
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

}  // namespace vlessbench
