#include "server/netem.hpp"

#include <ifaddrs.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <net/if.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <iterator>
#include <memory>

#include <netlink/netlink.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/netem.h>
#include <netlink/route/qdisc/prio.h>
#include <netlink/route/tc.h>

namespace vlessbench::netem {

namespace {

constexpr std::uint32_t handle(std::uint32_t major, std::uint32_t minor) { return (major << 16) | minor; }

bool is_loopback(const asio::ip::address& a) { return a.is_loopback(); }

}  // namespace

std::vector<interface_plan> plan(const std::vector<emulated_port>& ports,
                                 const std::vector<interface_info>& interfaces) {
  std::vector<interface_plan> out;
  for (const auto& itf : interfaces) {
    if (!itf.up) continue;
    interface_plan p{itf, {}};
    for (const auto& port : ports) {
      if (!port.emulate.active()) continue;
      if (is_loopback(port.listen.address()) && !itf.loopback) continue;
      const auto i = static_cast<std::uint32_t>(p.bands.size());
      p.bands.push_back({port.listener, port.listen.port(), port.emulate, handle(root_major, plain_bands + 1 + i),
                         handle(root_major + 1 + i, 0)});
    }
    if (!p.bands.empty()) out.push_back(std::move(p));
  }
  return out;
}

std::uint32_t loss_probability(double pct) {
  const double max = std::numeric_limits<std::uint32_t>::max();
  return static_cast<std::uint32_t>(std::llround(std::clamp(pct, 0.0, 100.0) / 100.0 * max));
}

std::vector<interface_info> host_interfaces() {
  std::vector<interface_info> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_name) continue;
    const std::string name = a->ifa_name;
    if (std::any_of(out.begin(), out.end(), [&](const interface_info& i) { return i.name == name; })) continue;
    out.push_back(
        {name, ::if_nametoindex(a->ifa_name), (a->ifa_flags & IFF_UP) != 0, (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

failure describe_error(int nl_error, const std::string& doing) {
  const int code = nl_error < 0 ? -nl_error : nl_error;
  const std::string what = doing + ": " + ::nl_geterror(code);
  switch (code) {
    case NLE_OBJ_NOTFOUND:
      return {what + " (the kernel has no netem or prio queueing discipline: \"Specified qdisc kind is unknown\")",
              "load sch_netem and sch_prio (modprobe sch_netem sch_prio) or run on a kernel that has them (Debian's "
              "does), or take emulate off the listeners"};
    case NLE_PERM:
    case NLE_NOACCESS:
      return {what + " (the daemon lacks CAP_NET_ADMIN)",
              "run it with CAP_NET_ADMIN (the packaged systemd unit grants it: AmbientCapabilities=CAP_NET_ADMIN) "
              "or as root, or take emulate off the listeners"};
    default: return {what, "take emulate off the listeners"};
  }
}

namespace {

struct sock_deleter {
  void operator()(nl_sock* s) const { ::nl_socket_free(s); }
};
struct qdisc_deleter {
  void operator()(rtnl_qdisc* q) const { ::rtnl_qdisc_put(q); }
};
struct cls_deleter {
  void operator()(rtnl_cls* c) const { ::rtnl_cls_put(c); }
};
struct cache_deleter {
  void operator()(nl_cache* c) const { ::nl_cache_free(c); }
};
using sock_ptr = std::unique_ptr<nl_sock, sock_deleter>;
using qdisc_ptr = std::unique_ptr<rtnl_qdisc, qdisc_deleter>;
using cls_ptr = std::unique_ptr<rtnl_cls, cls_deleter>;
using cache_ptr = std::unique_ptr<nl_cache, cache_deleter>;

sock_ptr connect(std::optional<failure>& error) {
  sock_ptr sk(::nl_socket_alloc());
  if (!sk) {
    error = failure{"netlink: out of memory", ""};
    return nullptr;
  }
  if (const int rc = ::nl_connect(sk.get(), NETLINK_ROUTE); rc < 0) {
    error = describe_error(rc, "netlink connect");
    return nullptr;
  }
  return sk;
}

qdisc_ptr root_prio(unsigned ifindex, std::uint32_t major, int bands) {
  qdisc_ptr q(::rtnl_qdisc_alloc());
  auto* tc = TC_CAST(q.get());
  ::rtnl_tc_set_ifindex(tc, static_cast<int>(ifindex));
  ::rtnl_tc_set_parent(tc, TC_H_ROOT);
  ::rtnl_tc_set_handle(tc, handle(major, 0));
  ::rtnl_tc_set_kind(tc, "prio");
  ::rtnl_qdisc_prio_set_bands(q.get(), bands);
  // prio's default priomap: every TOS to the first three bands, as pfifo_fast would.
  std::uint8_t map[] = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  ::rtnl_qdisc_prio_set_priomap(q.get(), map, sizeof map);
  return q;
}

qdisc_ptr netem_child(unsigned ifindex, const band& b) {
  qdisc_ptr q(::rtnl_qdisc_alloc());
  auto* tc = TC_CAST(q.get());
  ::rtnl_tc_set_ifindex(tc, static_cast<int>(ifindex));
  ::rtnl_tc_set_parent(tc, b.classid);
  ::rtnl_tc_set_handle(tc, b.netem_handle);
  ::rtnl_tc_set_kind(tc, "netem");
  ::rtnl_netem_set_limit(q.get(), 10000);  // packets held: a 40 ms path at line rate needs more than 1000
  if (b.emulate.delay_ms > 0) ::rtnl_netem_set_delay(q.get(), static_cast<int>(b.emulate.delay_ms * 1000));
  if (b.emulate.jitter_ms > 0) ::rtnl_netem_set_jitter(q.get(), static_cast<int>(b.emulate.jitter_ms * 1000));
  if (b.emulate.loss_pct > 0) ::rtnl_netem_set_loss(q.get(), static_cast<int>(loss_probability(b.emulate.loss_pct)));
  return q;
}

// u32: the source port at offset 20 (IPv4 without options) or 40 (IPv6) to the band's class.
cls_ptr port_filter(unsigned ifindex, const band& b, bool v6) {
  cls_ptr c(::rtnl_cls_alloc());
  auto* tc = TC_CAST(c.get());
  ::rtnl_tc_set_ifindex(tc, static_cast<int>(ifindex));
  ::rtnl_tc_set_parent(tc, handle(root_major, 0));
  ::rtnl_tc_set_kind(tc, "u32");
  ::rtnl_cls_set_prio(c.get(), v6 ? 2 : 1);
  ::rtnl_cls_set_protocol(c.get(), v6 ? ETH_P_IPV6 : ETH_P_IP);
  ::rtnl_u32_add_key_uint16(c.get(), b.port, 0xffff, v6 ? 40 : 20, 0);
  ::rtnl_u32_set_classid(c.get(), b.classid);
  // Terminal: a match ends the classification with the class above. Without the flag (tc sets it
  // for a flowid; libnl does not) a matching key is taken as a link onward, so no packet reached
  // the netem band (seen in the qemu guest: netem 0 packets sent, tc printing no "terminal").
  ::rtnl_u32_set_flags(c.get(), TC_U32_TERMINAL);
  return c;
}

// The root qdiscs with the given major handle, as (ifindex, qdisc) to delete.
int delete_roots(nl_sock* sk, std::uint32_t major, const std::function<void(int)>& deleted) {
  nl_cache* raw = nullptr;
  if (const int rc = ::rtnl_qdisc_alloc_cache(sk, &raw); rc < 0) return rc;
  const cache_ptr cache(raw);
  int result = 0;
  for (nl_object* o = ::nl_cache_get_first(cache.get()); o; o = ::nl_cache_get_next(o)) {
    auto* q = reinterpret_cast<rtnl_qdisc*>(o);  // a qdisc cache holds qdiscs
    auto* tc = TC_CAST(q);
    if (::rtnl_tc_get_parent(tc) != TC_H_ROOT || ::rtnl_tc_get_handle(tc) != handle(major, 0)) continue;
    if (const int rc = ::rtnl_qdisc_delete(sk, q); rc < 0)
      result = rc;
    else
      deleted(::rtnl_tc_get_ifindex(tc));
  }
  return result;
}

std::optional<failure> install(nl_sock* sk, const interface_plan& p) {
  const unsigned ifindex = p.interface.index;
  const std::string where = " on " + p.interface.name;
  const auto root = root_prio(ifindex, root_major, static_cast<int>(plain_bands + p.bands.size()));
  if (const int rc = ::rtnl_qdisc_add(sk, root.get(), NLM_F_CREATE | NLM_F_REPLACE); rc < 0)
    return describe_error(rc, "add root prio qdisc" + where);
  for (const auto& b : p.bands) {
    const auto child = netem_child(ifindex, b);
    if (const int rc = ::rtnl_qdisc_add(sk, child.get(), NLM_F_CREATE); rc < 0)
      return describe_error(rc, "add netem qdisc" + where + " for " + b.listener);
    for (const bool v6 : {false, true}) {
      const auto f = port_filter(ifindex, b, v6);
      if (const int rc = ::rtnl_cls_add(sk, f.get(), NLM_F_CREATE); rc < 0)
        return describe_error(rc, std::string("add u32 filter (") + (v6 ? "IPv6" : "IPv4") + ")" + where);
    }
  }
  return std::nullopt;
}

std::string if_name(int index) {
  char buf[IF_NAMESIZE] = {};
  return ::if_indextoname(static_cast<unsigned>(index), buf) ? std::string(buf) : std::to_string(index);
}

}  // namespace

installer::~installer() { remove(); }

std::vector<std::string> installer::clear_leftovers(std::optional<failure>& error) {
  std::vector<std::string> cleaned;
  const auto sk = connect(error);
  if (!sk) return cleaned;
  if (const int rc = delete_roots(sk.get(), root_major, [&](int i) { cleaned.push_back(if_name(i)); }); rc < 0)
    error = describe_error(rc, "remove the netem qdiscs a previous daemon left");
  return cleaned;
}

std::optional<failure> installer::apply(const std::vector<emulated_port>& ports) {
  std::vector<emulated_port> wanted;
  std::copy_if(ports.begin(), ports.end(), std::back_inserter(wanted),
               [](const emulated_port& p) { return p.emulate.active(); });
  if (wanted == installed_) return std::nullopt;
  std::optional<failure> error;
  const auto sk = connect(error);
  if (!sk) return error;
  const auto plans = plan(wanted, host_interfaces());
  // What was ours and is not wanted any longer goes first.
  for (const auto& name : interfaces_) {
    if (std::any_of(plans.begin(), plans.end(), [&](const auto& p) { return p.interface.name == name; })) continue;
    const qdisc_ptr q(::rtnl_qdisc_alloc());
    ::rtnl_tc_set_ifindex(TC_CAST(q.get()), static_cast<int>(::if_nametoindex(name.c_str())));
    ::rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
    ::rtnl_tc_set_handle(TC_CAST(q.get()), handle(root_major, 0));
    ::rtnl_qdisc_delete(sk.get(), q.get());  // gone already (the interface went away) is fine
  }
  interfaces_.clear();
  installed_.clear();
  for (const auto& p : plans) {
    // A prio replaced in place keeps its old classes' children: start each interface afresh.
    const qdisc_ptr old(::rtnl_qdisc_alloc());
    ::rtnl_tc_set_ifindex(TC_CAST(old.get()), static_cast<int>(p.interface.index));
    ::rtnl_tc_set_parent(TC_CAST(old.get()), TC_H_ROOT);
    ::rtnl_tc_set_handle(TC_CAST(old.get()), handle(root_major, 0));
    ::rtnl_qdisc_delete(sk.get(), old.get());
    if (auto f = install(sk.get(), p)) {
      interfaces_.push_back(p.interface.name);
      remove();
      return f;
    }
    interfaces_.push_back(p.interface.name);
  }
  installed_ = std::move(wanted);
  return std::nullopt;
}

void installer::remove() {
  if (interfaces_.empty()) return;
  std::optional<failure> error;
  const auto sk = connect(error);
  if (sk) {
    for (const auto& name : interfaces_) {
      const qdisc_ptr q(::rtnl_qdisc_alloc());
      ::rtnl_tc_set_ifindex(TC_CAST(q.get()), static_cast<int>(::if_nametoindex(name.c_str())));
      ::rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
      ::rtnl_tc_set_handle(TC_CAST(q.get()), handle(root_major, 0));
      ::rtnl_qdisc_delete(sk.get(), q.get());
    }
  }
  interfaces_.clear();
  installed_.clear();
}

std::optional<failure> installer::probe() {
  std::optional<failure> error;
  const auto sk = connect(error);
  if (!sk) return error;
  const unsigned lo = ::if_nametoindex("lo");
  if (lo == 0) return failure{"no loopback interface to probe netem on", ""};
  const auto root = root_prio(lo, probe_major, static_cast<int>(plain_bands + 1));
  const int rc = ::rtnl_qdisc_add(sk.get(), root.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (rc == -NLE_EXIST) return std::nullopt;  // lo has a root qdisc already (a running daemon's)
  if (rc < 0) return describe_error(rc, "probe: add a prio qdisc on lo");
  const band b{"probe", 9, path_emulation{1, 0, 0}, handle(probe_major, plain_bands + 1), handle(probe_major + 1, 0)};
  const auto child = netem_child(lo, b);
  const int crc = ::rtnl_qdisc_add(sk.get(), child.get(), NLM_F_CREATE);
  ::rtnl_qdisc_delete(sk.get(), root.get());
  if (crc < 0) return describe_error(crc, "probe: add a netem qdisc on lo");
  return std::nullopt;
}

}  // namespace vlessbench::netem
