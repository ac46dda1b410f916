#pragma once
// One normal form for IP addresses, so that the same host never compares unequal to itself:
// an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address, and an IPv6 scope id is
// dropped (addresses compare as bytes).
#include <asio/ip/address.hpp>

namespace vlessbench {

// ::ffff:a.b.c.d -> a.b.c.d; other addresses unchanged (without an IPv6 scope id).
asio::ip::address unmapped(const asio::ip::address& a);

}  // namespace vlessbench
