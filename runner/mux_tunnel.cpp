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

std::array<std::uint8_t, 8> next_global_id(mux_path& path) {
  const std::uint64_t v = path.global_ids();
  std::array<std::uint8_t, 8> id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(v >> (8 * i));
  return id;
}

}  // namespace vlessbench::runner
