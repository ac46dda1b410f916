#pragma once
// A vless path with `mux=on` (issue 12): the one mux connection its samples
// share. Each sample's tunnel is a sub-connection of it (core/mux_client.hpp):
// the New frame with the first request, Keep frames after, End when the sample
// closes. The connection is made, and remade after a failure, outside any
// sample's clock (tunnel::prepare); with `muxnew=connection` a new-connection
// sample makes a mux connection of its own instead, inside its clock, and
// closes it after.
#include <memory>
#include <string>

#include "core/asio_compat.hpp"
#include "core/mux_client.hpp"

namespace vlessbench::runner {

struct mux_path {
  mux::target dest;                         // the target, as every sub's New frame names it
  bool fresh_per_new = false;               // muxnew=connection
  std::shared_ptr<mux::connection> shared;  // nullptr until the first sample needs it
  std::uint64_t connections = 0;            // mux connections made for this path (shared or own)
};

// The shared connection when it is usable; else a new one (not connected yet:
// made is set, and the caller connects it). Unusable ones are dropped.
std::shared_ptr<mux::connection> shared_connection(mux_path& path, asio::any_io_executor ex,
                                                   const vless::client_plan& plan, bool& made);

}  // namespace vlessbench::runner
