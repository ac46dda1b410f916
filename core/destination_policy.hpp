#pragma once
// Where a VLESS session may connect (config [destinations]): the daemon's own [[target]]
// listeners and loopback addresses always, anything else only inside a configured network. A VM
// reachable by others must not become an open relay.
#include <functional>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "config.hpp"
#include "net_address.hpp"

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

// machine is asked only when dest's port is that of a [[target]] on a wildcard address: such a
// target is "our own" on every address of the machine.
bool destination_allowed(const config& cfg, const asio::ip::tcp::endpoint& dest,
                         const std::function<address_list()>& machine = machine_addresses);

}  // namespace vlessbench
