#pragma once
// One listener's live state, shared by the daemon that owns it and the connections it accepted.
#include <cstdint>
#include <memory>
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/config/listener_kind.hpp"
#include "core/net/reality_auth.hpp"
#include "core/net/path_emulation.hpp"
#include "core/net/socket_policy.hpp"
#include "core/wire/transport_spec.hpp"

namespace vlessbench {

// A listener's settings as open connections see them: a reload updates the object in place, so
// a connection picks the new policy up at its next read. Only the policies are read off the main
// thread; name, transport, generation and closed are the main thread's (the accept loop copies
// the transport into each connection it accepts: a reload applies to later connections).
struct listener_runtime {
  std::string name;
  listener_kind kind = listener_kind::target;
  asio::ip::tcp::endpoint endpoint;
  shared_tcp_policy tcp;
  shared_tcp_policy upstream_tcp;
  transport_spec transport;  // a vless listener's (core/wire/transport_spec.hpp)
  // security = "reality": the listener's REALITY state and the TLS context made from it, which
  // its connections use in place of the daemon's.
  std::shared_ptr<reality::listener_state> reality;
  std::shared_ptr<asio::ssl::context> reality_tls;
  path_emulation emulate;  // what netem adds on its port (its sessions' log lines name it)
  std::uint64_t generation = 0;
  bool closed = false;
};

}  // namespace vlessbench
