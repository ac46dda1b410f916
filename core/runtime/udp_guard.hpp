#pragma once
// Loops from one spoofed datagram (issue 23): the sources the UDP echo and the DNS responder never
// answer, so a datagram forged with the source of another answering service (this daemon's own
// listeners, a second install's, a well-known reflector) gets no answer and starts no loop. Pure.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/net/asio_compat.hpp"

namespace vlessbench {

// Port 0 and the well-known ports of services that answer any datagram: echo 7, discard 9,
// daytime 13, qotd 17, chargen 19, time 37, DNS 53, NTP 123, NetBIOS 137/138, SNMP 161/162,
// LDAP 389, IKE 500, syslog 514, RIP 520, SSDP 1900, mDNS 5353, memcached 11211 ...
bool is_reflector_port(std::uint16_t port);

// Empty: the datagram may be answered. Otherwise why not: "reflector_port" (is_reflector_port),
// "own_listener" (a port of one of the daemon's own UDP listeners, from a loopback address or the
// address the datagram was sent to).
std::string_view udp_source_refusal(const asio::ip::udp::endpoint& peer, const asio::ip::udp::endpoint& local,
                                    const std::vector<std::uint16_t>& own_ports);

// The marker every echo answer carries (core/wire/route_header.hpp): a datagram holding it is another
// echo's answer and is never echoed.
bool is_udp_echo_answer(std::string_view datagram);

// A DNS message with QR set is a response: never answered (not even FORMERR).
bool is_dns_response(std::string_view message);

}  // namespace vlessbench
