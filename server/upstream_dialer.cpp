#include "server/upstream_dialer.hpp"

#include "server/reject_code.hpp"

#include <spdlog/spdlog.h>

#include "server/destination_policy.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench::vless_server::detail {

using asio::ip::tcp;
using asio::ip::udp;

awaitable<dial_result<allowed_endpoints>> upstream_dialer::resolve(const destination& d) {
  dial_result<allowed_endpoints> out;
  allowed_endpoints found;
  if (d.type == address_type::domain) {
    auto [ec, results] = co_await resolver_.async_resolve(d.address, std::to_string(d.port), as_tuple_awaitable);
    if (ec) {
      out.failure = {dial_failure::step::resolve, to_string(reject_code::resolve_failed), ec.message()};
      co_return out;
    }
    for (const auto& r : results) found.list_.push_back(r.endpoint());
  } else {
    // The parsers give 4 or 16 bytes; anything else is no address to dial.
    const auto ip = ip_of(d);
    if (!ip) {
      out.failure = {dial_failure::step::resolve, to_string(reject_code::resolve_failed), "not an IP address"};
      co_return out;
    }
    found.list_.emplace_back(*ip, d.port);
  }
  // Checked before any connect, and every address must pass: a name that resolves to one allowed
  // and one forbidden address would otherwise reach the forbidden one on a retry. Against the
  // config current now (a reload may have come during the lookup). By protocol: a UDP destination
  // may be a UDP target on the machine's addresses, and a datagram to a [[vless]] port nests nothing.
  const auto cfg = rt_.live.current();
  const auto proto = d.net == network::udp ? ip_protocol::udp : ip_protocol::tcp;
  for (const auto& ep : found.list_) {
    if (const auto v = check_destination(*cfg, ep, machine_addresses, proto); v != destination_verdict::allowed) {
      out.failure = {dial_failure::step::policy, reject_reason(v), format_endpoint(ep)};
      co_return out;
    }
  }
  out.value = std::move(found);
  co_return out;
}

std::optional<dial_failure> upstream_dialer::register_route(const flow_id& id, std::shared_ptr<const route_info> info,
                                                            std::optional<route_registration>& reg) {
  reg.emplace(rt_.routes, id, std::move(info));
  if (reg->owned()) return std::nullopt;
  // The kernel gives no two live connections one identity: an entry left behind is a bug. Fail
  // closed rather than relay a connection whose route the target would misname.
  spdlog::error("vless upstream: route {} is registered already", to_string(reg->id()));
  return dial_failure{dial_failure::step::route, to_string(reject_code::route_conflict), to_string(reg->id())};
}

namespace {

template <class Socket>
std::optional<dial_failure> endpoints_of(const Socket& sock, typename Socket::endpoint_type& local,
                                         typename Socket::endpoint_type& remote) {
  std::error_code lec, rec;
  local = sock.local_endpoint(lec);
  remote = sock.remote_endpoint(rec);
  if (!lec && !rec) return std::nullopt;
  return dial_failure{dial_failure::step::route, to_string(reject_code::connect_failed),
                      "endpoints: " + (lec ? lec : rec).message()};
}

}  // namespace

awaitable<std::optional<dial_failure>> upstream_dialer::connect(tcp::socket& sock, const allowed_endpoints& to,
                                                                const shared_tcp_policy& policy, tcp_policy& applied,
                                                                std::shared_ptr<const route_info> info,
                                                                std::optional<route_registration>& reg,
                                                                const std::function<bool()>& stopped) {
  std::error_code last = asio::error::host_not_found;
  for (const auto& ep : to.endpoints()) {
    std::error_code ec;
    if (sock.is_open()) sock.close(ec);
    sock.open(ep.protocol(), ec);
    if (ec) {
      last = ec;
      continue;
    }
    applied = policy.load();
    (void)apply_on_open(sock.native_handle(), applied);
    std::error_code cec;
    {
      // Until the connection is registered (or failed): a banner target waits for it (route_registry).
      const route_registry::dial dialing(rt_.routes);
      std::tie(cec) = co_await sock.async_connect(ep, as_tuple_awaitable);
      if (!cec && !stopped()) {
        (void)apply_on_open(sock.native_handle(), applied);
        // Registered before a byte is sent on it: the target reads nothing from this connection
        // that it could look up too early. Both ends as the kernel has them (a destination of
        // 0.0.0.0 is connected as 127.0.0.1, and that is what the target sees).
        tcp::endpoint local, remote;
        if (auto failed = endpoints_of(sock, local, remote)) co_return failed;
        co_return register_route(flow_id::tcp(local, remote), std::move(info), reg);
      }
    }
    if (!cec) cec = asio::error::operation_aborted;
    last = cec;
    if (stopped()) break;
  }
  co_return dial_failure{dial_failure::step::connect, to_string(reject_code::connect_failed), last.message()};
}

std::optional<dial_failure> upstream_dialer::connect(udp::socket& sock, const allowed_endpoints& to,
                                                     std::shared_ptr<const route_info> info,
                                                     std::optional<route_registration>& reg, udp::endpoint& remote) {
  std::error_code last = asio::error::host_not_found;
  for (const auto& cand : to.endpoints()) {
    const udp::endpoint ep(cand.address(), cand.port());
    std::error_code ec;
    if (sock.is_open()) sock.close(ec);
    sock.open(ep.protocol(), ec);
    if (!ec) sock.non_blocking(true, ec);
    if (!ec) sock.connect(ep, ec);
    if (ec) {
      last = ec;
      continue;
    }
    udp::endpoint local;
    if (auto failed = endpoints_of(sock, local, remote)) return failed;
    return register_route(flow_id::udp(local, remote), std::move(info), reg);
  }
  return dial_failure{dial_failure::step::connect, to_string(reject_code::connect_failed), last.message()};
}

}  // namespace vlessbench::vless_server::detail
