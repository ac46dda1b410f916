#include "net_address.hpp"

namespace vlessbench {

asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v4()) return a;
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6);
  return asio::ip::address_v6(v6.to_bytes());  // scope id dropped: compared as bytes
}

}  // namespace vlessbench
