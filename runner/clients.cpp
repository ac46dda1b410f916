#include "runner/clients.hpp"
#include "runner/clients_detail.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/wire/client_entries.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/share_link.hpp"
#include "runner/cli.hpp"
#include "runner/failure.hpp"
#include "runner/path_spec.hpp"
#include "runner/measure.hpp"
#include "runner/proxy_protocol.hpp"
#include "runner/report.hpp"

namespace vlessbench::runner {
namespace clients_detail {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::vector<core_kind>& core_kinds() {
  static const std::vector<core_kind> kinds = {
      {"mihomo", {"-d", "{dir}", "-f", "{config}"}, {"-t", "-d", "{dir}", "-f", "{config}"}, {"-v"}, ".yaml", true},
      {"sing-box", {"run", "-c", "{config}"}, {"check", "-c", "{config}"}, {"version"}, ".json", true, true, false},
      {"xray", {"run", "-c", "{config}"}, {"run", "-test", "-c", "{config}"}, {"version"}, ".json", true},
      {"v2ray", {"-config", "{config}"}, {"-test", "-config", "{config}"}, {"-version"}, ".json", false, false},
  };
  return kinds;
}

std::optional<fs::path> on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) return p;
  }
  return std::nullopt;
}

std::string tail_of(const fs::path& file, std::size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "  " + all[i] + "\n";
  return out;
}

// Why a core's checker refused its config, in one line: its last words, or for a transport it
// does not have (v2ray 4.34: httpupgrade, grpc) just that.
std::string refusal_reason(const fs::path& check_log) {
  std::ifstream in(check_log);
  std::string last;
  for (std::string l; std::getline(in, l);)
    if (l.find_first_not_of(" \t\r") != std::string::npos) last = l;
  constexpr std::string_view transport = "unknown transport protocol: ";
  if (const auto at = last.find(transport); at != std::string::npos)
    return "it has no transport " + last.substr(at + transport.size());
  if (last.empty()) return "it said nothing";
  return last.size() > 240 ? last.substr(0, 240) + "..." : last;
}

// A child in a process group of its own (a terminal's Ctrl-C reaches the runner, which stops it
// after writing what it measured), ended with the runner however the runner ends (parent death).
pid_t spawn(const fs::path& exe, const std::vector<std::string>& args, const fs::path& dir, const fs::path& log) {
  std::vector<std::string> argv_s{exe.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || null < 0 || ::chdir(dir.c_str()) != 0) ::_exit(127);
    ::dup2(null, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits up to timeout; the exit status, or nullopt while it still runs.
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
}

bool port_open(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A free loopback port below the usual ephemeral range: Xray does not bind a port that a
// TIME-WAIT connection holds.
std::uint16_t free_port(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(20000, 32767);
  for (int i = 0; i < 500; ++i) {
    const auto port = static_cast<std::uint16_t>(pick(rng));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (bound && !port_open(port)) return port;
  }
  throw std::runtime_error("no free loopback port in 20000-32767");
}

// Reads until parse_response has a whole head (or the peer closes, or 2 s pass); the status, or
// the reason there is none.
int read_status(int fd, maybe_failure& why) {
  std::string in;
  char buf[4096];
  while (in.size() < 64 * 1024) {
    const auto r = http::parse_response(in);
    if (r.complete()) return r.value.status;
    if (r.invalid()) {
      why = failure{"bad response: " + std::string(r.reason)};
      return 0;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      why = failure{n == 0 ? "closed before a response" : std::string("recv: ") + std::strerror(errno)};
      return 0;
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
  why = failure{"response head too large"};
  return 0;
}

// One request through a core's entry as the run will send it: CONNECT to the target, and for an
// http:// target a GET of its path whose response head comes back; why not when it was not.
// (For https:// and banner:// targets a 2xx to the CONNECT is all it asks.)
maybe_failure probe_entry(std::uint16_t port, const target_url& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return failure{std::string("socket: ") + std::strerror(errno)};
  const timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  maybe_failure why;
  auto send_all = [fd](const std::string& data) {
    return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    why = failure{std::string("connect: ") + std::strerror(errno)};
  } else if (!send_all(format_connect_request(target.authority()))) {
    why = failure{"send CONNECT failed"};
  } else if (const int status = read_status(fd, why); status / 100 != 2) {
    if (status) why = failure{"CONNECT answered " + std::to_string(status)};
  } else if (target.scheme == target_scheme::http) {
    if (!send_all("GET " + target.path + " HTTP/1.1\r\nHost: " + target.authority() +
                  "\r\nUser-Agent: vlessbench-clients-ready\r\nConnection: close\r\n\r\n"))
      why = failure{"send GET failed"};
    else if (const int got = read_status(fd, why); got && got / 100 == 5)
      why = failure{"GET answered " + std::to_string(got)};  // a proxy's own 502/503: its outbound is not ready
  }
  ::close(fd);
  return why;
}

// The target the run will use (`--target URL` or `--target=URL` among the options passed on,
// else run's default), for the readiness probe.
std::optional<target_url> run_target(const std::vector<std::string>& run_args) {
  std::string text = "http://127.0.0.1:8080/";
  for (std::size_t i = 0; i < run_args.size(); ++i) {
    if (run_args[i] == "--target" && i + 1 < run_args.size()) text = run_args[i + 1];
    if (run_args[i].rfind("--target=", 0) == 0) text = run_args[i].substr(9);
  }
  std::string reason;
  return parse_target_url(text, reason);  // a bad one: run says why, with its usage exit
}

// Before any core starts: one request through the node with the built-in client, and one direct.
// A node the daemon refuses (a wrong UUID: it ends the session right after the header, its log
// says unknown_user) or a target that is down fails the whole command in a second, with what the
// daemon logged, instead of every core's 10 s readiness wait and "no core could be started".
void preflight(const share_link& node, const target_url& target) {
  if (is_datagram(target.scheme)) return;
  measure_options o;
  o.target = target;
  std::string reason;
  for (const std::string& arg : {std::string("direct=direct"), "node=" + format_share_link(node)})
    if (auto p = parse_path_arg(arg, reason)) o.paths.push_back(std::move(*p));
  const auto baseline = finalize_paths(o.paths, reason);
  if (o.paths.size() != 2 || !baseline || !check_paths_for_target(o.paths, o.target, reason)) return;
  o.baseline = *baseline;
  o.new_count = 1;
  o.reuse_count = 0;
  o.warmup = 0;
  o.abort_after_failed_rounds = 0;
  o.run_id = "preflight";
  std::string direct_error, node_error;
  for (const auto& smp : measure(o)) (smp.path == "direct" ? direct_error : node_error) = smp.ok ? "" : smp.error;
  const std::string head = "node " + (node.name.empty() ? std::string("(unnamed)") : node.name) + ": ";
  if (!direct_error.empty() && !node_error.empty())
    throw std::runtime_error(
        head + "the target " + target.authority() + " answers neither directly (" + direct_error +
        ") nor through the node (" + node_error +
        "; the daemon's log: vless.reject reason connect_failed): is the target running? no core was started");
  if (direct_error.empty() && closed_after_header(node_error))
    throw std::runtime_error(head + "the daemon ended the built-in client's session right after its VLESS header (" +
                             node_error +
                             "): it refuses the link's UUID (its access log: vless.reject reason unknown_user); "
                             "compare the link with `vlessbenchd links`; no core was started");
}

// Absolute paths: mihomo reads -f relative to its -d, so a relative --out (the default,
// results/clients) had it start on a config of its own making, with no entry to the node.
std::vector<std::string> fill(const std::vector<std::string>& args, const fs::path& config, const fs::path& dir) {
  std::vector<std::string> out;
  for (auto a : args) {
    if (a == "{config}") a = fs::absolute(config).string();
    if (a == "{dir}") a = fs::absolute(dir).string();
    out.push_back(a);
  }
  return out;
}

std::string config_text(const core_kind& k, const share_link& link, std::uint16_t port) {
  const std::string name = k.name;
  if (name == "mihomo") {
    return "mixed-port: " + std::to_string(port) +
           "\nbind-address: 127.0.0.1\nallow-lan: false\nmode: rule\nlog-level: warning\nipv6: false\n"
           "proxies:\n" +
           mihomo_proxy(link) + "rules:\n  - MATCH," + link.name + "\n";
  }
  nlohmann::ordered_json cfg;
  if (name == "sing-box") {
    cfg["log"] = {{"level", "warn"}};
    cfg["inbounds"] = {{{"type", "mixed"}, {"listen", "127.0.0.1"}, {"listen_port", port}}};
    cfg["outbounds"] = {nlohmann::ordered_json::parse(singbox_outbound(link))};
  } else {
    cfg["log"] = {{"loglevel", "warning"}};
    cfg["inbounds"] = {
        {{"listen", "127.0.0.1"}, {"port", port}, {"protocol", "http"}, {"settings", nlohmann::json::object()}}};
    cfg["outbounds"] = {nlohmann::ordered_json::parse(v2ray_outbound(link))};
  }
  return cfg.dump(2) + "\n";
}

core_process::~core_process() {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  if (!wait_for(pid, 3000ms)) {
    ::kill(pid, SIGKILL);
    wait_for(pid, 2000ms);
  }
}

std::string first_line_of_output(const fs::path& exe, const std::vector<std::string>& args, const fs::path& dir) {
  const fs::path log = dir / "version.txt";
  const pid_t pid = spawn(exe, args, dir, log);
  if (!wait_for(pid, 10s)) {
    ::kill(pid, SIGKILL);
    wait_for(pid, 2s);
    return "?";
  }
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace clients_detail

std::string path_name_part(const std::string& text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out.empty() ? "node" : out.substr(0, 40);
}

namespace clients_detail {

// The nodes: --link and the vless:// lines of --links, each with a name.
std::vector<share_link> read_nodes(const clients_args& a) {
  std::vector<std::string> texts = a.links;
  if (!a.links_file.empty()) {
    std::ifstream in(a.links_file);
    if (!in) throw std::runtime_error("cannot read " + a.links_file);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("vless://", 0) == 0) texts.push_back(l);
  }
  if (texts.empty()) throw std::runtime_error("no vless:// link given (arguments or --links FILE)");
  std::vector<share_link> nodes;
  for (const auto& t : texts) {
    std::string reason;
    auto l = parse_share_link(t, reason);
    if (!l) throw std::runtime_error("link " + t.substr(0, 60) + "...: " + reason);
    if (l->name.empty()) l->name = "node" + std::to_string(nodes.size() + 1);
    nodes.push_back(*l);
  }
  return nodes;
}

// The cores: --core NAME=PATH first, then PATH.
core_list find_cores(const clients_args& a) {
  core_list cores;
  for (const auto& k : core_kinds()) {
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), k.name) == a.only.end()) continue;
    std::optional<fs::path> exe;
    for (const auto& cp : a.core_paths) {
      const auto eq = cp.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--core " + cp + ": expected NAME=PATH");
      if (cp.substr(0, eq) == k.name) exe = fs::path(cp.substr(eq + 1));
    }
    if (exe && ::access(exe->c_str(), X_OK) != 0)
      throw std::runtime_error("--core " + std::string(k.name) + "=" + exe->string() + ": not an executable file");
    if (!exe) exe = on_path(k.name);
    if (!exe) {
      std::cerr << "vlessbench clients: " << k.name << " not found (on PATH, or --core " << k.name
                << "=PATH): left out\n";
      continue;
    }
    cores.emplace_back(&k, *exe);
  }
  for (const auto& cp : a.core_paths) {
    const std::string n = cp.substr(0, cp.find('='));
    if (std::none_of(core_kinds().begin(), core_kinds().end(), [&](const core_kind& k) { return n == k.name; }))
      throw std::runtime_error("--core " + cp + ": unknown core (mihomo, sing-box, xray, v2ray)");
  }
  if (cores.empty())
    throw std::runtime_error(
        "no core found: pass --core mihomo=PATH, --core sing-box=PATH, --core xray=PATH or --core v2ray=PATH");
  return cores;
}

// The core's own checker first: a config it refuses is left out with its words.
bool config_accepted(const core_kind& k, const fs::path& exe, const fs::path& config, const fs::path& dir,
                     const std::string& node) {
  const fs::path check_log = dir / "check.log";
  const pid_t checker = spawn(exe, fill(k.check, config, dir), dir, check_log);
  const auto rc = wait_for(checker, 60s);
  if (!rc) {
    ::kill(checker, SIGKILL);
    wait_for(checker, 2s);
  }
  if (!rc || *rc != 0) {
    std::cerr << "vlessbench clients: " << k.name << " refused its config for " << node << ": "
              << refusal_reason(check_log) << ": left out (" << check_log.string() << ")\n";
    return false;
  }
  return true;
}

// Starts the core and waits up to 20 s for its entry port to open; false: left out (said why).
bool entry_opened(core_process& p, const core_kind& k, const fs::path& exe, const fs::path& config,
                  const fs::path& dir) {
  p.log = dir / (std::string(k.name) + ".log");
  p.pid = spawn(exe, fill(k.run, config, dir), dir, p.log);
  const auto end = std::chrono::steady_clock::now() + 20s;
  bool up = false;
  while (std::chrono::steady_clock::now() < end) {
    if (port_open(p.port)) {
      up = true;
      break;
    }
    if (const auto exited = wait_for(p.pid, 0ms)) {
      p.pid = -1;
      std::cerr << "vlessbench clients: " << k.name << " exited (" << *exited << ") before its entry opened:\n"
                << tail_of(p.log, 8);
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  if (!up) {
    if (p.pid > 0)
      std::cerr << "vlessbench clients: " << k.name << ": 127.0.0.1:" << p.port << " not open after 20 s: left out\n";
    return false;
  }
  return true;
}

// An open port is not a ready core: mihomo answered a first request 502 without dialling
// (tests/integration/test_cores.py). One request must be carried before any sample counts,
// within 10 s; datagram targets cannot go through the HTTP entry (run refuses them).
bool entry_ready(const core_process& p, const std::string& name, const std::optional<target_url>& target) {
  if (target && !is_datagram(target->scheme)) {
    const auto ready_by = std::chrono::steady_clock::now() + 10s;
    int tries = 0;
    maybe_failure why;
    do {
      ++tries;
      why = probe_entry(p.port, *target);
      if (!why || std::chrono::steady_clock::now() >= ready_by) break;
      std::this_thread::sleep_for(100ms);
    } while (tries < 100);
    if (why) {
      std::cerr << "vlessbench clients: " << name << ": no request carried through its entry within 10 s (" << tries
                << " tries, last: " << why->reason << "): left out\n"
                << tail_of(p.log, 5);
      return false;
    }
    if (tries > 1)
      std::cerr << "vlessbench clients: " << name << ": ready after " << tries << " tries (the first " << tries - 1
                << " not carried)\n";
  }
  return true;
}

// Each core for each node: its config, checked, the core started and its entry ready; a path for
// each that is (in listing, for cores.json), the others left out with a line saying why.
std::vector<std::unique_ptr<core_process>> start_cores(const clients_args& a, const std::vector<share_link>& nodes,
                                                       const core_list& cores, const fs::path& work,
                                                       std::vector<std::string>& paths,
                                                       nlohmann::ordered_json& listing) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::unique_ptr<core_process>> running;
  const bool many = nodes.size() > 1;
  const auto target = run_target(a.run_args);
  for (const auto& node : nodes)
    if (target) preflight(node, *target);
  for (const auto& node : nodes) {
    const std::string suffix = many ? "-" + path_name_part(node.name) : "";
    // The built-in client speaks TLS, not REALITY: a REALITY node is the cores' alone.
    if (!a.no_builtin && !node.reality) paths.push_back("builtin" + suffix + "=" + format_share_link(node));
    if (!a.no_builtin && node.reality)
      std::cerr << "vlessbench clients: the built-in client has no REALITY (node " << node.name << "): left out\n";
    for (const auto& [kind, exe] : cores) {
      const std::string name = std::string(kind->name) + suffix;
      if (!node.flow.empty() && !kind->vision) {
        // Its checker would accept the link and the core would silently drop the flow: the path
        // would be measured as something it is not.
        std::cerr << "vlessbench clients: " << kind->name << " has no flow " << node.flow << " (node " << node.name
                  << "): left out for that node\n";
        continue;
      }
      if (node.transport.kind == transport_kind::xhttp && !kind->xhttp) {
        std::cerr << "vlessbench clients: " << kind->name << " has no XHTTP (node " << node.name
                  << "): left out for that node\n";
        continue;
      }
      if (node.reality && !kind->reality) {
        std::cerr << "vlessbench clients: " << kind->name << " has no REALITY (node " << node.name
                  << "): left out for that node\n";
        continue;
      }
      const fs::path dir = work / name;
      fs::create_directories(dir);
      auto p = std::make_unique<core_process>();
      p->name = name;
      p->port = free_port(rng);
      const fs::path config = dir / (std::string("config") + kind->suffix);
      std::ofstream(config) << config_text(*kind, node, p->port);
      if (!config_accepted(*kind, exe, config, dir, node.name)) continue;
      const std::string version = first_line_of_output(exe, kind->version, dir);
      if (!entry_opened(*p, *kind, exe, config, dir)) continue;
      if (!entry_ready(*p, name, target)) {
        if (node.transport.kind == transport_kind::xhttp && std::string_view(kind->name) == "mihomo")
          std::cerr << "vlessbench clients: " << name << ": " << version
                    << ": mihomo has XHTTP since its 2026-03 releases; an older one accepts the entry and dials the "
                       "node as raw VLESS (the daemon's log: vless.reject bad_request \"bad request line\")\n";
        continue;
      }
      std::cerr << "vlessbench clients: " << name << " (" << version << ", " << exe.string()
                << ") entry http://127.0.0.1:" << p->port << "\n";
      listing.push_back({{"path", name},
                         {"core", kind->name},
                         {"version", version},
                         {"binary", exe.string()},
                         {"node", node.name},
                         {"entry", "http://127.0.0.1:" + std::to_string(p->port)},
                         {"config", config.string()}});
      paths.push_back(name + "=http://127.0.0.1:" + std::to_string(p->port));
      running.push_back(std::move(p));
    }
  }
  return running;
}

}  // namespace clients_detail

using namespace clients_detail;

int do_clients(const clients_args& a, const std::string& self) {
  const std::vector<share_link> nodes = read_nodes(a);
  const core_list cores = find_cores(a);
  if (a.delay_tests) return do_delay_tests(a, nodes, cores);

  const fs::path out = a.out;
  const fs::path work = out / "cores";
  fs::create_directories(work);
  std::vector<std::string> paths;
  nlohmann::ordered_json listing = nlohmann::ordered_json::array();
  paths.emplace_back("direct=direct");
  const auto running = start_cores(a, nodes, cores, work, paths, listing);
  std::ofstream(work / "cores.json") << listing.dump(2) << "\n";
  if (running.empty()) throw std::runtime_error("no core could be started (see the lines above)");

  // One run over all of them, interleaved (`vlessbench run`, which takes the rest of the options).
  std::vector<std::string> args{self, "run", "--out", out.string()};
  for (const auto& p : paths) {
    args.emplace_back("--path");
    args.push_back(p);
  }
  args.insert(args.end(), a.run_args.begin(), a.run_args.end());
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& s : args) argv.push_back(s.data());
  const int rc = run_cli(static_cast<int>(argv.size()), argv.data());
  // Each core that died during the run says so (its samples failed with their reasons).
  for (const auto& p : running)
    if (const auto exited = wait_for(p->pid, 0ms)) {
      std::cerr << "vlessbench clients: " << p->name << " exited (" << *exited << ") during the run:\n"
                << tail_of(p->log, 8);
      p->pid = -1;
    }
  return rc;
}

}  // namespace vlessbench::runner
