#include "route_registry.hpp"

#include <cstdio>
#include <functional>

namespace vlessbench {

std::string server_timing(const session_phases& p) {
  std::string out;
  auto add = [&](const char* name, std::int64_t from, std::int64_t to) {
    if (from < 0 || to < 0) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s;dur=%.3f", out.empty() ? "" : ", ", name,
                  static_cast<double>(to - from) / 1000.0);
    out += buf;
  };
  add("tls", 0, p.tls_done);
  add("vless", p.tls_done, p.header_complete);
  add("resolve", p.header_complete, p.resolved);
  add("upstream", p.resolved >= 0 ? p.resolved : p.header_complete, p.upstream_connected);
  return out;
}

std::size_t route_registry::endpoint_hash::operator()(const asio::ip::tcp::endpoint& ep) const noexcept {
  std::size_t h = std::hash<unsigned short>{}(ep.port());
  const auto addr = ep.address();
  if (addr.is_v4()) {
    h ^= std::hash<unsigned long>{}(addr.to_v4().to_uint()) * 0x9e3779b97f4a7c15ULL;
  } else {
    for (auto b : addr.to_v6().to_bytes()) h = h * 131 + b;
  }
  return h;
}

void route_registry::add(const asio::ip::tcp::endpoint& upstream_local,
                         std::shared_ptr<const route_info> info) {
  const std::lock_guard lock(mutex_);
  routes_[upstream_local] = std::move(info);
}

void route_registry::remove(const asio::ip::tcp::endpoint& upstream_local) {
  const std::lock_guard lock(mutex_);
  routes_.erase(upstream_local);
}

std::shared_ptr<const route_info> route_registry::find(const asio::ip::tcp::endpoint& peer) const {
  const std::lock_guard lock(mutex_);
  auto it = routes_.find(peer);
  return it == routes_.end() ? nullptr : it->second;
}

}  // namespace vlessbench
