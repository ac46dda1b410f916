#include "runner/mux_tunnel.hpp"

namespace vlessbench::runner {

std::shared_ptr<mux::connection> shared_connection(mux_path& path, asio::any_io_executor ex,
                                                   const vless::client_plan& plan, bool& made) {
  made = false;
  if (path.shared && path.shared->usable()) return path.shared;
  if (path.shared) path.shared->close();
  path.shared = std::make_shared<mux::connection>(std::move(ex), plan);
  ++path.connections;
  made = true;
  return path.shared;
}

}  // namespace vlessbench::runner
