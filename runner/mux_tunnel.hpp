#pragma once
// A vless path with `mux=on` (issue 12): the one mux connection its samples
// share. Each sample's tunnel is a sub-connection of it (core/client/mux_client.hpp):
// the New frame with the first request, Keep frames after, End when the sample
// closes. The connection is made, and remade after a failure, outside any
// sample's clock (tunnel::prepare); with `muxnew=connection` a new-connection
// sample makes a mux connection of its own instead, inside its clock, and
// closes it after.
//
// udp:// and dns:// targets (runner/datagram.hpp): each flow is a UDP sub (the New frame with the
// first datagram, Keep frames after). packetEncoding=xudp makes it an XUDP sub: a GlobalID in the
// New frame, each Keep frame naming the packet's address. packetEncoding=xudp without mux=on is
// what Xray's VLESS outbound does for UDP: every flow is a command 3 connection of its own that
// carries one XUDP sub (own_per_flow), nothing is shared.
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/client/mux_client.hpp"

namespace vlessbench::runner {

struct mux_path {
  mux::target dest;                                    // the target, as every sub's New frame names it
  bool fresh_per_new = false;                          // muxnew=connection
  bool xudp = false;                                   // packetEncoding=xudp (UDP subs only)
  bool own_per_flow = false;                           // xudp without mux=on: no shared connection
  std::mt19937_64 global_ids{std::random_device{}()};  // XUDP GlobalIDs, one per flow
  std::shared_ptr<mux::connection> shared;             // nullptr until the first sample needs it
  std::uint64_t connections = 0;                       // mux connections made for this path (shared or own)
};

// The shared connection when it is usable; else a new one (not connected yet:
// made is set, and the caller connects it). Unusable ones are dropped.
std::shared_ptr<mux::connection> shared_connection(mux_path& path, asio::any_io_executor ex,
                                                   const vless::client_plan& plan, bool& made);

// An XUDP flow's GlobalID. Xray derives it from the UDP source of the client's inbound (a keyed
// hash), so one source keeps one ID; the runner has no inbound and each flow is its own source:
// 8 random bytes per flow, distinct so the server never joins two flows.
std::array<std::uint8_t, 8> next_global_id(mux_path& path);

}  // namespace vlessbench::runner
