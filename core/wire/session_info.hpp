#pragma once
// What a VLESS session shares with the targets it relays to: who it is and how far it got. The
// route registry hands it to a target; route_header.hpp turns it into response headers.
#include <atomic>
#include <cstdint>
#include <string>

namespace vlessbench {

// Microseconds since accept; -1 = not reached. The session's thread writes it while the target,
// perhaps on another thread, reads it: a relaxed atomic (each value stands alone).
class phase_us {
 public:
  phase_us() = default;
  phase_us(const phase_us& o) : v_(o.get()) {}
  phase_us& operator=(const phase_us& o) { return *this = o.get(); }
  phase_us& operator=(std::int64_t v) {
    v_.store(v, std::memory_order_relaxed);
    return *this;
  }
  std::int64_t get() const { return v_.load(std::memory_order_relaxed); }
  operator std::int64_t() const { return get(); }  // NOLINT(google-explicit-constructor): reads like a number

 private:
  std::atomic<std::int64_t> v_{-1};
};

// An XHTTP session's requests (server/transport/xhttp_session.hpp), on the session's clock, which
// for XHTTP starts at the session's first request (its GET or a POST, whichever came first).
struct xhttp_phases {
  phase_us get;         // the downlink GET arrived; -1: none (stream-one has no GET)
  phase_us first_post;  // the first uplink POST arrived (stream-one: its one POST, 0)
  // packet-up: the gaps between consecutive uplink POSTs in the order they reached the session
  // (xhttp::post_gaps): how many, their median and the longest (µs); post_gaps -1 in other modes.
  phase_us post_gaps;
  phase_us post_gap_median;
  phase_us post_gap_max;
  // 1: over HTTP/2, the connection had carried an earlier session (Xray's XMUX); 0: it had not,
  // or HTTP/1.1 (no connection carries two sessions' downlinks); -1: not XHTTP.
  phase_us reused;
  bool any() const { return get >= 0 || first_post >= 0 || reused >= 0; }
};

struct session_phases {
  phase_us tls_done;
  phase_us upgrade_done;  // ws / httpupgrade: the 101 sent (the upgrade request read before it)
  phase_us first_vless_byte;
  phase_us header_complete;
  phase_us resolved;
  phase_us upstream_connected;
  phase_us first_upstream_byte;
  phase_us first_client_byte;  // first byte written back to the client
  phase_us closed;
  // A Mux.Cool sub-connection's New frame: its resolve and upstream phases start there, not at
  // the session's header (-1 for a whole session).
  phase_us sub_opened;
  xhttp_phases xhttp;  // transport = xhttp only
  std::int64_t dial_from() const { return sub_opened >= 0 ? sub_opened.get() : header_complete.get(); }
};

// One VLESS session as the target sees it. The session owns it and updates the phases; the
// registry and the target only read. Everything but the phases is set before registration.
struct route_info {
  std::uint64_t session_id = 0;
  // A Mux.Cool sub-connection (VLESS command 3): its number in the session, 1, 2, ... in the order
  // opened (not the wire id, which is reused after End and is 0 for a single XUDP); 0: no mux.
  std::uint32_t sub = 0;
  std::string user;
  std::string client;            // original client address "ip:port"
  std::string listener;          // VLESS listener name
  std::string quickack;          // the listener's ACK policy for this session: "kernel", "on", "off"
  std::string transport;         // "tls", "ws", "httpupgrade" (the route header names all but "tls")
  std::string ja4;               // the client's TLS fingerprint (core/wire/ja4.hpp), "" without one
  std::uint64_t generation = 0;  // the config generation the session was accepted under
  session_phases phases;
};

}  // namespace vlessbench
