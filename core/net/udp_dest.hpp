#pragma once
// A UDP listener bound to a wildcard address (0.0.0.0, [::]) still has to prove routes per
// datagram, and the route registry's key names both ends: the VLESS session's upstream socket and
// the exact address it sent to (route_registry.hpp, flow_id). The kernel tells a wildcard socket
// which local address a datagram was sent to only through IP_PKTINFO / IPV6_PKTINFO, and sends a
// reply from that address only when told so; Asio has neither, so this file does both with
// recvmsg/sendmsg on the socket's descriptor after Asio says it is ready.
#include <cstddef>
#include <system_error>

#include "core/net/asio_compat.hpp"

namespace vlessbench {

// Turns on the destination address of every received datagram (IP_PKTINFO, and IPV6_RECVPKTINFO on
// an IPv6 socket, which covers IPv4-mapped datagrams too).
std::error_code enable_destination_address(asio::ip::udp::socket& socket);

// Forged datagrams from the network with this machine's own address as their source (issue 23 item
// 10, docs/sessions.md "Forged datagrams"): attaches a socket filter (classic BPF) that makes the
// kernel drop every datagram whose source address equals its destination address but which did not
// arrive on the loopback device. A datagram one of the machine's own sockets sends to one of its own
// addresses has that form (Linux picks the destination address as the source of a local route) and
// always travels over lo; from an interface it was forged (Linux itself drops it unless
// accept_local=1). IP_PKTINFO cannot tell them apart: it names the address's interface for both.
// Such datagrams never reach the socket; the kernel counts them in the socket's drops.
std::error_code drop_forged_local_sources(asio::ip::udp::socket& socket);

struct datagram {
  std::size_t size = 0;
  asio::ip::udp::endpoint peer;   // its source
  asio::ip::udp::endpoint local;  // the address it was sent to (and the socket's port)
};

// own: the socket's bound endpoint (the caller keeps it: no getsockname per datagram).

// One datagram into buf (a longer one is cut to buf's size). Without the kernel's destination
// address (enable_destination_address not called) local is own.
awaitable<std::error_code> receive_datagram(asio::ip::udp::socket& socket, const asio::ip::udp::endpoint& own,
                                            asio::mutable_buffer buf, datagram& out);

// Sends data to peer from local's address, as the reply to a datagram that arrived on it.
awaitable<std::error_code> send_datagram_from(asio::ip::udp::socket& socket, const asio::ip::udp::endpoint& own,
                                              asio::const_buffer data, const asio::ip::udp::endpoint& peer,
                                              const asio::ip::udp::endpoint& local);

}  // namespace vlessbench
