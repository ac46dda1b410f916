#include "core/runtime/route_registry.hpp"

#include <functional>

namespace vlessbench {

flow_id flow_id::tcp(const asio::ip::tcp::endpoint& from, const asio::ip::tcp::endpoint& to) {
  return flow_id{protocol::tcp, unmapped(from.address()), from.port(), unmapped(to.address()), to.port()};
}

flow_id flow_id::udp(const asio::ip::udp::endpoint& from, const asio::ip::udp::endpoint& to) {
  return flow_id{protocol::udp, unmapped(from.address()), from.port(), unmapped(to.address()), to.port()};
}

std::string to_string(const flow_id& id) {
  auto ep = [](const asio::ip::address& a, unsigned short port) {
    return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(port);
  };
  return std::string(id.proto == flow_id::protocol::tcp ? "tcp " : "udp ") + ep(id.from_address, id.from_port) + "->" +
         ep(id.to_address, id.to_port);
}

namespace {
std::size_t address_hash(const asio::ip::address& a) {
  if (a.is_v4()) return std::hash<std::uint32_t>{}(a.to_v4().to_uint()) * 0x9e3779b97f4a7c15ULL;
  std::size_t h = 0xcbf29ce484222325ULL;
  for (auto b : a.to_v6().to_bytes()) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}
}  // namespace

std::size_t route_registry::flow_hash::operator()(const flow_id& id) const noexcept {
  std::size_t h = address_hash(id.from_address);
  h = h * 31 + address_hash(id.to_address);
  h = h * 31 + (static_cast<std::size_t>(id.from_port) << 17 | static_cast<std::size_t>(id.to_port) << 1 |
                static_cast<std::size_t>(id.proto));
  return h;
}

bool route_registry::add(const flow_id& id, std::shared_ptr<const route_info> owner) {
  const std::lock_guard lock(mutex_);
  return routes_.try_emplace(id, std::move(owner)).second;
}

void route_registry::remove(const flow_id& id, const route_info* owner) {
  const std::lock_guard lock(mutex_);
  auto it = routes_.find(id);
  if (it != routes_.end() && it->second.get() == owner) routes_.erase(it);
}

std::shared_ptr<const route_info> route_registry::find(const flow_id& id) const {
  const std::lock_guard lock(mutex_);
  auto it = routes_.find(id);
  return it == routes_.end() ? nullptr : it->second;
}

}  // namespace vlessbench
