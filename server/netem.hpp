#pragma once
// Path emulation per listener (`emulate = { delay_ms, jitter_ms, loss_pct }`): the kernel's netem
// queueing discipline on what the host sends from an emulated listener's port, set through
// rtnetlink (libnl-route-3; no `tc`). On each interface the listeners' traffic leaves by (every up
// interface for a wildcard address, lo for a loopback one): a root prio qdisc with the daemon's
// fixed handle, its first three bands for all other traffic (prio's default priomap), one more
// band per emulated listener whose child is netem, and u32 filters on the source port (IPv4 and
// IPv6) that send the listener's packets to its band. The handle marks what the daemon installed,
// so a start removes what a dead daemon left.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>
#include <asio/ip/tcp.hpp>

#include "core/net/path_emulation.hpp"

namespace vlessbench::netem {

// The root qdisc's major handle ("vb"): what carries it on an interface is the daemon's.
inline constexpr std::uint32_t root_major = 0x7662;
// --check's throwaway probe on lo, beside a running daemon's root.
inline constexpr std::uint32_t probe_major = 0x7663;
// prio's own bands before the emulated ones (its default priomap sends everything there).
inline constexpr std::uint32_t plain_bands = 3;

// One emulated listener, as bound (its port is the one the kernel gave a port 0).
struct emulated_port {
  std::string listener;
  asio::ip::tcp::endpoint listen;
  path_emulation emulate;
  bool operator==(const emulated_port&) const = default;
};

struct interface_info {
  std::string name;
  unsigned index = 0;
  bool up = false;
  bool loopback = false;
};

// One band of an interface's root prio: the listener's source port, its class and netem's handle.
struct band {
  std::string listener;
  std::uint16_t port = 0;
  path_emulation emulate;
  std::uint32_t classid = 0;       // root_major:(plain_bands + 1 + i)
  std::uint32_t netem_handle = 0;  // (root_major + 1 + i):0
  bool operator==(const band&) const = default;
};
struct interface_plan {
  interface_info interface;
  std::vector<band> bands;
};

// Pure: which interfaces get which bands. A loopback address leaves by loopback interfaces, any
// other address (a wildcard above all) by every interface that is up, lo included.
std::vector<interface_plan> plan(const std::vector<emulated_port>& ports,
                                 const std::vector<interface_info>& interfaces);

// netem's units: delay and jitter in microseconds, loss as a probability scaled to 2^32 - 1.
std::uint32_t loss_probability(double pct);

// The up and down interfaces of this host (getifaddrs).
std::vector<interface_info> host_interfaces();

// An installer's failure: what went wrong and what to do about it.
struct failure {
  std::string reason;
  std::string remedy;
  std::string text() const { return reason + (remedy.empty() ? "" : ": " + remedy); }
};

// The reason and remedy for a netlink error code (libnl's -NLE_*): an unknown qdisc kind (the
// kernel has no netem or prio: "Specified qdisc kind is unknown"), a missing CAP_NET_ADMIN.
failure describe_error(int nl_error, const std::string& doing);

class installer {
 public:
  installer() = default;
  ~installer();
  installer(const installer&) = delete;
  installer& operator=(const installer&) = delete;

  // Removes every root qdisc with the daemon's handle (what a dead daemon left); the interfaces
  // it cleaned, by name.
  std::vector<std::string> clear_leftovers(std::optional<failure>& error);
  // Makes the host's qdiscs what ports asks for: removes the daemon's where no port is emulated
  // any longer, installs (replacing) where one is. Nothing to install is no netlink write.
  std::optional<failure> apply(const std::vector<emulated_port>& ports);
  // At stop: removes what apply installed.
  void remove();
  const std::vector<emulated_port>& installed() const { return installed_; }

  // --check: can this host install a netem under prio (a throwaway on lo, removed at once)?
  static std::optional<failure> probe();

 private:
  std::vector<emulated_port> installed_;
  std::vector<std::string> interfaces_;  // where a root of ours is
};

}  // namespace vlessbench::netem
