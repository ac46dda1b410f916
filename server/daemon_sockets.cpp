// The daemon's UDP listeners and DNS responders: opened at start and by a reload (bound before
// the commit, so a port in use fails the reload and changes nothing), updated in place when a
// reload keeps their endpoint, stopped when it drops them. Split from server/daemon.cpp, which
// runs the TCP listeners and the reload commit.
#include <algorithm>

#include <fmt/format.h>

#include "core/log/logging.hpp"
#include "core/wire/net_address.hpp"
#include "server/daemon.hpp"

namespace vlessbench {

namespace {

dns::zone_rules zone_of(const dns_listener_config& c) {
  dns::zone_rules zone;
  zone.zone = c.zone;
  if (c.a) zone.v4 = c.a->to_bytes();
  if (c.aaaa) zone.v6 = c.aaaa->to_bytes();
  zone.v4_from_arrival = !c.a;
  zone.v6_from_arrival = !c.aaaa;
  return zone;
}

tcp::endpoint as_tcp(const asio::ip::udp::endpoint& ep) { return {ep.address(), ep.port()}; }

}  // namespace

std::vector<std::uint16_t> daemon::own_udp_ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& u : udp_targets_) out.push_back(u->endpoint().port());
  for (const auto& d : dns_) out.push_back(d->endpoint().port());
  return out;
}

std::shared_ptr<target::udp_echo_target> daemon::open_udp_target(const udp_listener_config& c) {
  asio::ip::udp::socket sock(io_);
  std::error_code ec;
  sock.open(c.listen.protocol(), ec);
  if (!ec && c.listen.address().is_v6()) sock.set_option(asio::ip::v6_only(true), ec);
  if (!ec) sock.bind(c.listen, ec);
  if (ec)
    throw std::runtime_error(fmt::format("udp_target listener \"{}\" cannot bind {}: {}", c.name,
                                         format_endpoint(as_tcp(c.listen)), ec.message()));
  return std::make_shared<target::udp_echo_target>(target_, c.name, std::move(sock), c.mode);
}

std::shared_ptr<target::dns_responder> daemon::open_dns(const dns_listener_config& c) {
  // UDP and TCP share the port. Port 0: the kernel picks it for UDP, and TCP takes the same one;
  // when another process holds that port for TCP, another UDP port is tried (a bounded number).
  constexpr int port_zero_attempts = 16;
  const int attempts = c.listen.port() == 0 ? port_zero_attempts : 1;
  std::error_code ec;
  for (int attempt = 1;; ++attempt) {
    asio::ip::udp::socket udp(io_);
    tcp::acceptor acceptor(io_);
    ec.clear();
    udp.open(c.listen.address().is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4(), ec);
    if (!ec && c.listen.address().is_v6()) udp.set_option(asio::ip::v6_only(true), ec);
    if (!ec) udp.bind({c.listen.address(), c.listen.port()}, ec);
    asio::ip::udp::endpoint bound;
    if (!ec) bound = udp.local_endpoint(ec);
    if (!ec) acceptor.open(c.listen.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec && c.listen.address().is_v6()) acceptor.set_option(asio::ip::v6_only(true), ec);
    if (!ec) acceptor.bind({bound.address(), bound.port()}, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec)
      return std::make_shared<target::dns_responder>(target_, c.name, zone_of(c), std::move(udp), std::move(acceptor));
    if (ec != asio::error::address_in_use || attempt >= attempts) break;
  }
  throw std::runtime_error(
      fmt::format("dns listener \"{}\" cannot listen on {}: {}", c.name, format_endpoint(c.listen), ec.message()));
}

daemon::opened_sockets daemon::open_sockets(const reload_plan& plan) {
  opened_sockets out;
  for (const auto& u : plan.udp_targets.open) out.udp_targets.push_back(open_udp_target(u));
  for (const auto& d : plan.dns.open) out.dns.push_back(open_dns(d));
  return out;
}

void daemon::commit_sockets(const reload_plan& plan, opened_sockets opened) {
  for (const auto& c : plan.udp_targets.close) {
    const auto it = std::find_if(udp_targets_.begin(), udp_targets_.end(),
                                 [&](const auto& u) { return u->endpoint() == c.listen; });
    if (it == udp_targets_.end()) continue;
    (*it)->stop();  // its open flows are logged now
    udp_targets_.erase(it);
  }
  for (const auto& c : plan.dns.close) {
    const auto it = std::find_if(dns_.begin(), dns_.end(), [&](const auto& d) { return d->endpoint() == c.listen; });
    if (it == dns_.end()) continue;
    (*it)->stop();
    dns_.erase(it);
  }
  for (const auto& [from, to] : plan.udp_targets.keep) {
    for (auto& u : udp_targets_)
      if (u->endpoint() == from.listen) u->update(to.name, to.mode);
  }
  for (const auto& [from, to] : plan.dns.keep) {
    for (auto& d : dns_)
      if (d->endpoint() == from.listen) d->update(to.name, zone_of(to));
  }
  for (auto& u : opened.udp_targets) {
    spdlog::info("udp_target listener \"{}\" ({}) on {}", u->name(), to_string(u->mode()),
                 format_endpoint(as_tcp(u->endpoint())));
    u->start();
    udp_targets_.push_back(std::move(u));
  }
  for (auto& d : opened.dns) {
    spdlog::info("dns listener \"{}\" on {} (UDP and TCP)", d->name(), format_endpoint(d->endpoint()));
    d->start();
    dns_.push_back(std::move(d));
  }
}

}  // namespace vlessbench
