#pragma once
// `vlessbench clients`: the seed's comparison, automated (issue 28, docs/runner.md "Real
// clients"). For a VLESS node (share links, or the daemon's `links` output) and the real cores a
// user has (mihomo, sing-box, Xray, v2ray: on PATH, or --core NAME=PATH), each core gets a config
// with a local HTTP entry on a free loopback port and the node as its outbound (the same entries
// `vlessbenchd links` prints: core/wire/client_entries.hpp), checked with the core's own checker,
// started and waited for; then one `vlessbench run` measures direct, the built-in client and every
// core's entry interleaved; the cores are stopped on every way out.
#include <string>
#include <vector>

namespace vlessbench::runner {

struct clients_args {
  std::vector<std::string> links;       // vless:// links
  std::string links_file;               // a file whose vless:// lines are read (`vlessbenchd links` output)
  std::vector<std::string> core_paths;  // NAME=PATH
  std::vector<std::string> only;        // the cores to use (default: every one found)
  bool no_builtin = false;              // leave the built-in client out
  std::string out = "results/clients";
  std::vector<std::string> run_args;  // passed on to `vlessbench run`
  // --delay-tests: instead of a run, each core's own delay test (mihomo's controller) or its
  // documented formula (emulated) beside the true new and reused times (docs/clients.md).
  bool delay_tests = false;
  int delay_count = 5;     // delay tests, new and reused samples per core and node
  std::string daemon_log;  // the daemon's access log: the phases of the delay tests' requests
};

int do_clients(const clients_args& a, const std::string& self);

// For tests: a name a path may carry, from a link's name (letters, digits, '-', '_', '.').
std::string path_name_part(const std::string& text);

}  // namespace vlessbench::runner
