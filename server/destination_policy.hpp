#pragma once
// Where a VLESS session may connect (config [destinations]): the daemon's own targets (TCP:
// [[target]], [[banner]] and [[dns]]; UDP: [[udp_target]] and [[dns]]) and loopback addresses always, anything else
// only inside a configured network. A VM reachable by others must not become an open relay. Never the daemon's own
// [[vless]] listeners: a session through its own VLESS port nests another session (and two more descriptors) per level.
#include <functional>
#include <string_view>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "core/config/config.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench {

using address_list = std::vector<asio::ip::address>;

// The machine's interface addresses (getifaddrs), and the errno if they cannot be read (then
// empty): getifaddrs needs a netlink socket, which a sandbox may forbid (systemd's
// RestrictAddressFamilies without AF_NETLINK).
struct machine_address_read {
  address_list addresses;
  int error = 0;
};
machine_address_read read_machine_addresses();

// read_machine_addresses().addresses: empty if they cannot be read.
address_list machine_addresses();

enum class destination_verdict {
  allowed,
  not_allowed,     // outside [destinations]
  vless_listener,  // a port of one of the daemon's own [[vless]] listeners on a local address
};
// The vless.reject reason for a refusal ("dest_not_allowed", "dest_is_vless_listener").
std::string_view reject_reason(destination_verdict v);

// Which of a port's two protocols a session sends to: a VLESS TCP session (or a Mux TCP
// sub-connection) reaches TCP listeners, a UDP one UDP listeners; a UDP datagram to a [[vless]]
// listener's port nests nothing.
enum class ip_protocol { tcp, udp };

// machine is asked only when dest's port is that of an own target of the protocol on a wildcard
// address (such a target is "our own" on every address of the machine) or of a [[vless]] listener
// (which must not be reached on any address of the machine).
destination_verdict check_destination(const config& cfg, const asio::ip::tcp::endpoint& dest,
                                      const std::function<address_list()>& machine = machine_addresses,
                                      ip_protocol proto = ip_protocol::tcp);
inline bool destination_allowed(const config& cfg, const asio::ip::tcp::endpoint& dest,
                                const std::function<address_list()>& machine = machine_addresses,
                                ip_protocol proto = ip_protocol::tcp) {
  return check_destination(cfg, dest, machine, proto) == destination_verdict::allowed;
}

}  // namespace vlessbench
