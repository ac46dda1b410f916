#pragma once
// The endpoints a running vlessbenchd bound, for whoever started it (`--ports-file FILE`): a
// listener written "HOST:0" takes the port the kernel gives, and only the daemon knows which. The
// file is one JSON object, written whole (temp file + rename) once every listener is bound and
// again after each reload that succeeded; removed at exit. `vlessbenchd links --ports-file` and
// the integration harness read it (docs/configuration.md, "Port 0").
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "core/config/config.hpp"

namespace vlessbench {

// What was bound under each listener name, and the admin listener's endpoint.
struct bound_ports {
  std::vector<std::pair<std::string, asio::ip::tcp::endpoint>> listeners;
  std::optional<asio::ip::tcp::endpoint> admin;
  bool operator==(const bound_ports&) const = default;
};

// Every endpoint of c written with port 0 takes the one bound under its listener's name (the
// admin's: bound.admin). Returns the names of port-0 listeners bound has no entry for (empty: all
// resolved); those keep port 0.
std::vector<std::string> resolve_ports(config& c, const bound_ports& bound);

// The bound endpoints of a resolved config as the file holds them:
// {"generation": N, "listeners": [{"kind", "name", "listen", "protocols": "tcp"|"udp"|"tcp+udp"}],
//  "admin": "HOST:PORT" | null}.
std::string format_ports_file(const config& c, std::uint64_t generation);
// The inverse (kinds and the generation are not needed to resolve a config): nullopt with a
// reason when the text is not such a file.
std::optional<bound_ports> parse_ports_file(std::string_view text, std::string& reason);

// Writes text to path through a temp file in the same folder and a rename, so a reader sees the
// old file or the new one, never a part; throws std::runtime_error naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace vlessbench
