#pragma once
// What `vlessbench clients` and its --delay-tests share (runner/clients.cpp, runner/delay_tests.cpp):
// the cores it knows, how one is configured, checked, started and stopped. Not a public interface.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/wire/share_link.hpp"
#include "runner/clients.hpp"
#include "runner/path_spec.hpp"

namespace vlessbench::runner::clients_detail {

// What each core is called with: {config} and {dir} are filled in.
struct core_kind {
  const char* name;
  std::vector<std::string> run, check, version;
  const char* suffix;
  bool vision;  // speaks flow xtls-rprx-vision (v2ray 4.34 has no flows: it would run such a link as plain VLESS)
  bool reality = true;  // speaks security=reality (v2ray has none; sing-box only when built with uTLS)
  // Has an XHTTP client (type=xhttp). sing-box has none, and its entry without a transport would
  // dial the node as raw VLESS; mihomo's came in 2026 (1.19.1's checker accepts the entry, its dial fails).
  bool xhttp = true;
};
using core_list = std::vector<std::pair<const core_kind*, std::filesystem::path>>;

// One started core; stopped (SIGTERM, then SIGKILL after 3 s) when it goes.
struct core_process {
  std::string name;
  pid_t pid = -1;
  std::uint16_t port = 0;
  std::filesystem::path log;
  core_process() = default;
  core_process(const core_process&) = delete;
  core_process& operator=(const core_process&) = delete;
  ~core_process();
};

std::vector<share_link> read_nodes(const clients_args& a);
core_list find_cores(const clients_args& a);
// The core's config: a local HTTP (mihomo, sing-box: mixed) entry on port, the node as its outbound.
std::string config_text(const core_kind& k, const share_link& link, std::uint16_t port);
std::uint16_t free_port(std::mt19937& rng);
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout);
std::string first_line_of_output(const std::filesystem::path& exe, const std::vector<std::string>& args,
                                 const std::filesystem::path& dir);
bool config_accepted(const core_kind& k, const std::filesystem::path& exe, const std::filesystem::path& config,
                     const std::filesystem::path& dir, const std::string& node);
bool entry_opened(core_process& p, const core_kind& k, const std::filesystem::path& exe,
                  const std::filesystem::path& config, const std::filesystem::path& dir);
bool entry_ready(const core_process& p, const std::string& name, const std::optional<target_url>& target);
std::optional<target_url> run_target(const std::vector<std::string>& run_args);

// `vlessbench clients --delay-tests` (runner/delay_tests.cpp).
int do_delay_tests(const clients_args& a, const std::vector<share_link>& nodes, const core_list& cores);

}  // namespace vlessbench::runner::clients_detail
