// vlessbenchd: VLESS listeners and the targets they reach, in one process (DESIGN.md §3).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <vector>
#if defined(VLESSBENCH_INJECT_FAULT_RACE)
#include <thread>
#endif

#include <CLI/CLI.hpp>
#include <unistd.h>

#include "server/daemon.hpp"
#include "server/links.hpp"
#include "server/reality_keys.hpp"
#include "server/ports_file.hpp"
#include "core/log/logging.hpp"
#include "core/net/tls.hpp"
#include "core/wire/uuid.hpp"

namespace {

// Test-only faults (CMake -DVLESSBENCH_INJECT_FAULT=leak|race|double_free, never set by
// tools/test.sh or the package): each must make the integration suite fail in its sanitizer tree,
// which shows that the harness reads every daemon's exit status and sanitizer report
// (docs/reliability.md, issue 27). Every daemon start and clean stop passes through here.
#if defined(VLESSBENCH_INJECT_FAULT_LEAK) || defined(VLESSBENCH_INJECT_FAULT_DOUBLE_FREE)
void* volatile injected_block = nullptr;
#endif
#if defined(VLESSBENCH_INJECT_FAULT_RACE)
long injected_counter = 0;  // written by two threads without a lock
#endif

void inject_fault_at_start() {
#if defined(VLESSBENCH_INJECT_FAULT_LEAK)
  injected_block = std::malloc(4096);  // the only pointer to it is dropped: LeakSanitizer at exit
  injected_block = nullptr;
#elif defined(VLESSBENCH_INJECT_FAULT_RACE)
  std::thread a([] {
    for (int i = 0; i < 1000; ++i) injected_counter = injected_counter + 1;
  });
  std::thread b([] {
    for (int i = 0; i < 1000; ++i) injected_counter = injected_counter + 1;
  });
  a.join();
  b.join();
#endif
}

void inject_fault_at_exit() {
#if defined(VLESSBENCH_INJECT_FAULT_DOUBLE_FREE)
  injected_block = std::malloc(64);
  std::free(injected_block);
  std::free(injected_block);  // AddressSanitizer: attempting double-free
#endif
}

// A folder the daemon must write in at start, or why it cannot: what to do, in one line.
std::optional<std::string> folder_problem(const std::string& key, const std::string& path, const char* unit_dir) {
  namespace fs = std::filesystem;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  const auto st = fs::status(folder, ec);
  const std::string head = key + ": \"" + path + "\": ";
  if (!fs::exists(st))
    return head + "the folder " + folder.string() + " does not exist: create it (mkdir -p " + folder.string() +
           "; the package's unit has systemd make " + unit_dir + ") or point " + key + " into a folder that exists";
  if (!fs::is_directory(st)) return head + folder.string() + " is not a folder";
  if (fs::exists(path) ? ::access(path.c_str(), W_OK) != 0 : ::access(folder.c_str(), W_OK | X_OK) != 0)
    return head + "not writable by this user: make it writable by the user that runs vlessbenchd";
  return std::nullopt;
}

// A listener with emulate needs netem and CAP_NET_ADMIN: --check asks the kernel with a throwaway
// qdisc on lo (removed at once; the one thing it writes), so it says what start would say.
std::optional<std::string> emulation_problem(const vlessbench::config& cfg) {
  std::string first;
  for (const auto& v : cfg.vless)
    if (first.empty() && v.emulate.active()) first = v.name;
  for (const auto& t : cfg.target)
    if (first.empty() && t.emulate.active()) first = t.name;
  if (first.empty()) return std::nullopt;
  if (const auto f = vlessbench::netem::installer::probe())
    return "emulate on listener \"" + first + "\": cannot install netem: " + f->text();
  return std::nullopt;
}

// Everything the start opens that --check can judge without writing: the certificate files (or
// the folder they are generated in) and the access log's folder, every problem at once.
std::vector<std::string> start_problems(const vlessbench::config& cfg, const std::string& file,
                                        const std::string& ports_file) {
  std::vector<std::string> problems;
  using state = vlessbench::tls::certificate_check::state;
  const auto cert = vlessbench::tls::check_certificate_files(cfg.tls);
  if (cert.result == state::problem) problems.push_back(file + ": " + cert.message);
  if (cfg.log.access != "stdout")
    if (auto p = folder_problem("log.access", cfg.log.access, "/var/log/vlessbench, its LogsDirectory"))
      problems.push_back(file + ": " + *p);
  if (!ports_file.empty())
    if (auto p = folder_problem("--ports-file", ports_file, "nothing: the unit passes none")) problems.push_back(*p);
  if (auto p = emulation_problem(cfg)) problems.push_back(file + ": " + *p);
  if (auto p = vlessbench::reality_key_problem(cfg)) problems.push_back(file + ": " + *p);
  return problems;
}

// docs/configuration.md, "Exit codes", and --help list the same.
constexpr int exit_usage = 2;
constexpr const char* exit_codes_help =
    "Exit codes: 0 ok (the daemon: stopped by SIGTERM or SIGINT after its drain; --check: the file is valid); "
    "1 a config or start-up error, a failed check, links or reload (each with its reason on stderr); "
    "2 usage error (an unknown option or subcommand, a missing value).";

int check(const std::string& file, const std::string& ports_file, bool say_ok) {
  try {
    auto cfg = vlessbench::load_config_file(file);
    // What start or reload will open is checked too, without writing anything (the unit runs
    // --check before every start).
    const auto problems = start_problems(cfg, file, ports_file);
    for (const auto& p : problems) std::cerr << p << "\n";
    if (!problems.empty()) return 1;
    using state = vlessbench::tls::certificate_check::state;
    const auto cert = vlessbench::tls::check_certificate_files(cfg.tls);
    if (cert.result == state::will_generate)
      std::cerr << file << ": " << cert.message << "\n";
    else
      (void)vlessbench::tls::make_server_context(cfg.tls);
  } catch (const vlessbench::config_error& e) {
    for (const auto& err : e.errors()) std::cerr << err << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << file << ": " << e.what() << "\n";
    return 1;
  }
  if (say_ok) std::cout << "ok\n";
  return 0;
}

// The process's name (/proc/PID/comm, readable for any user's process), or why there is none.
std::optional<std::string> process_name(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (!in || !std::getline(in, name)) return std::nullopt;
  return name;
}

// A broken file never reaches the daemon: `systemctl reload` fails with the reason instead. Nor
// does the signal reach a process that is not a vlessbenchd (SIGHUP ends most programs).
int reload_daemon(const std::string& file, pid_t pid) {
  if (pid <= 1) {  // kill() would reach a process group, every process, or init
    std::cerr << "vlessbenchd reload: --pid " << pid << ": not a daemon's process id\n";
    return 2;
  }
  const auto name = process_name(pid);
  if (!name) {
    std::cerr << "vlessbenchd reload: --pid " << pid
              << ": no such process (the daemon is not running, or --pid names an old one)\n";
    return 1;
  }
  if (*name != "vlessbenchd") {
    std::cerr << "vlessbenchd reload: --pid " << pid << " is \"" << *name
              << "\", not a vlessbenchd: no signal sent (the daemon's --pid-file holds its process id)\n";
    return 1;
  }
  if (const int rc = check(file, "", false); rc != 0) return rc;
  if (::kill(pid, SIGHUP) != 0) {
    std::cerr << "vlessbenchd reload: SIGHUP to " << pid << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cout << "ok: vlessbenchd " << pid << " reloads " << file << " (its log says the outcome)\n";
  return 0;
}

// `reload --pid-file`: the process id the daemon's --pid-file holds.
pid_t read_pid_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--pid-file " + path + ": " + std::strerror(errno) + " (is the daemon running?)");
  long long pid = 0;
  if (!(in >> pid) || pid <= 1 || pid > std::numeric_limits<pid_t>::max())
    throw std::runtime_error("--pid-file " + path + ": no process id in it");
  return static_cast<pid_t>(pid);
}

// The daemon's own --pid-file: written once its signal handlers are in place, removed at exit.
class pid_file {
 public:
  explicit pid_file(std::string path) : path_(std::move(path)) {
    if (path_.empty()) return;
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << ::getpid() << "\n";
      if (!out) throw std::runtime_error("--pid-file " + path_ + ": cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path_);
  }
  ~pid_file() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
  }
  pid_file(const pid_file&) = delete;
  pid_file& operator=(const pid_file&) = delete;

 private:
  std::string path_;
};

// A port another process holds: say who may hold it and how to find out.
std::string start_error_hint(const std::string& what) {
  if (what.find("Address already in use") == std::string::npos) return "";
  return "\nvlessbenchd: another process holds that port: is another vlessbenchd running (the demo's or a "
         "package's)? `ss -ltnup` names the process; stop it, or give this one other ports with --config";
}

// `links --ports-file`: the config's port-0 listeners take the ports the running daemon bound.
void resolve_from_ports_file(vlessbench::config& cfg, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("--ports-file " + path + ": " + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string reason;
  const auto bound = vlessbench::parse_ports_file(text, reason);
  if (!bound) throw std::runtime_error("--ports-file " + path + ": " + reason);
  if (const auto missing = vlessbench::resolve_ports(cfg, *bound); !missing.empty())
    throw std::runtime_error("--ports-file " + path + " names no port for listener \"" + missing.front() +
                             "\" (a file of another config?)");
}

// Resolves the REALITY keys `links` can know; drops (with a line on stderr saying why) the
// listeners whose key it cannot. True when one was dropped.
bool drop_listeners_without_reality_key(vlessbench::config& cfg) {
  bool dropped = false;
  for (auto it = cfg.vless.begin(); it != cfg.vless.end();) {
    auto one = cfg;
    one.vless = {*it};
    try {
      vlessbench::resolve_reality_keys(one, false);
      *it++ = std::move(one.vless.front());
    } catch (const std::exception& e) {
      std::cerr << "vlessbenchd links: no link for " << e.what() << "\n";
      it = cfg.vless.erase(it);
      dropped = true;
    }
  }
  return dropped;
}

// `links`: the share links and client entries of the config the daemon runs with.
int print_links_of(const std::string& config_file, const std::string& ports_file,
                   const vlessbench::links_options& opts) {
  if (config_file.empty()) {
    // The embedded default makes a new UUID at each start: only the daemon's own start-up lines
    // carry its links.
    std::cerr << "vlessbenchd links: --config FILE is required: the config the daemon runs with (the "
                 "package's: /etc/vlessbench/vlessbenchd.toml); a daemon on its embedded default printed "
                 "its links at start (the demo's: in its daemon.log)\n";
    return exit_usage;
  }
  try {
    auto cfg = vlessbench::load_config_file(config_file);
    // A REALITY listener whose key only a running daemon knows (made at each start, or not made
    // yet) has no link here: the other listeners' are printed, and a line says where its are.
    const bool dropped = drop_listeners_without_reality_key(cfg);
    if (dropped && cfg.vless.empty()) return 1;
    if (!ports_file.empty()) resolve_from_ports_file(cfg, ports_file);
    vlessbench::print_links(std::cout, cfg, opts);
    return 0;
  } catch (const vlessbench::config_error& e) {
    for (const auto& err : e.errors()) std::cerr << "vlessbenchd: " << err << "\n";
  } catch (const std::exception& e) {
    std::cerr << "vlessbenchd links: " << e.what() << "\n";
  }
  return 1;
}

// The daemon itself, on --config or the embedded default, until a signal stops it.
int start_daemon(const std::string& config_file, const std::string& ports_file, const std::string& pid_path) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    std::optional<std::filesystem::path> file;
    std::shared_ptr<const vlessbench::config> cfg;
    vlessbench::config loaded =
        config_file.empty() ? vlessbench::default_config() : vlessbench::load_config_file(config_file);
    if (!config_file.empty()) file = config_file;
    // The files' problems first: a REALITY key is written beside the certificate, so a missing
    // folder is reported as such, not as a key that cannot be written.
    if (const auto problems = start_problems(loaded, config_file, ports_file); !problems.empty()) {
      for (const auto& p : problems) std::cerr << "vlessbenchd: " << p << "\n";
      return 1;
    }
    vlessbench::resolve_reality_keys(loaded, true);
    cfg = std::make_shared<const vlessbench::config>(std::move(loaded));
    vlessbench::setup_logging(cfg->log.level);
    inject_fault_at_start();
    vlessbench::daemon d(cfg, file);
    if (!ports_file.empty()) d.set_ports_file(ports_file);
    const pid_file pid(pid_path);
    const int rc = d.run();
    inject_fault_at_exit();
    return rc;
  } catch (const vlessbench::config_error& e) {
    for (const auto& err : e.errors()) std::cerr << "vlessbenchd: " << err << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "vlessbenchd: error: " << e.what() << start_error_hint(e.what()) << "\n";
    return 1;
  }
}

// `vlessbenchd links`'s options.
struct links_command {
  CLI::App* cmd = nullptr;
  std::string config, ports;
  vlessbench::links_options opts;
  bool no_qr = false;
};

void add_links_command(CLI::App& app, links_command& c) {
  c.cmd = app.add_subcommand("links", "print share links, Clash/sing-box/v2ray entries and QR codes");
  c.cmd->add_option("-c,--config", c.config,
                    "TOML config file the daemon runs with (the package's: /etc/vlessbench/vlessbenchd.toml)");
  c.cmd->add_option("--host", c.opts.host, "address clients use to reach this machine");
  c.cmd->add_option("--sni", c.opts.sni, "TLS server name the clients send")->capture_default_str();
  c.cmd->add_flag("--no-qr", c.no_qr, "omit the terminal QR codes");
  c.cmd->add_option("--ports-file", c.ports,
                    "the running daemon's --ports-file: the ports its port-0 listeners were given");
}

// `vlessbenchd reload`'s options: the unit's ExecReload. The daemon binary sends the signal itself,
// because /bin/kill (procps) is not part of a minimal Debian install and systemd 252 has no
// Type=notify-reload.
struct reload_command {
  CLI::App* cmd = nullptr;
  std::string config, pid_file;
  pid_t pid = 0;
};

void add_reload_command(CLI::App& app, reload_command& c) {
  c.cmd = app.add_subcommand("reload", "check --config, then tell the daemon --pid to reload it (SIGHUP)");
  c.cmd->add_option("-c,--config", c.config, "TOML config file the daemon runs with")->required();
  auto* by_pid = c.cmd->add_option("--pid", c.pid, "the daemon's process id (systemd: $MAINPID)");
  auto* by_file = c.cmd->add_option("--pid-file", c.pid_file, "or the file the daemon's --pid-file wrote");
  by_pid->excludes(by_file);
  c.cmd->callback([by_pid, by_file] {
    if (by_pid->count() + by_file->count() == 0) throw CLI::RequiredError("--pid PID or --pid-file FILE");
  });
}

int run(int argc, char** argv) {
  CLI::App app{
      "vlessbenchd: the VLESS side of proxy-client tests: VLESS listeners (TLS, WebSocket, HTTPUpgrade, "
      "gRPC) with per-listener TCP_NODELAY/TCP_QUICKACK policies and the targets they reach (HTTP, HTTPS, "
      "banner, UDP echo, DNS), with an access log that proves each answer's route"};
  std::string config_file;
  bool check_only = false;
  app.add_option("-c,--config", config_file, "TOML config file (default: embedded loopback default)");
  app.add_flag("--check", check_only, "validate --config and exit: 'ok' and 0, or the errors and 1");
  std::string ports_file;
  app.add_option("--ports-file", ports_file,
                 "write the bound endpoints (a listener on port 0 gets one at start) to FILE as JSON, "
                 "rewritten after each reload, removed at exit");
  std::string pid_path;
  app.add_option("--pid-file", pid_path,
                 "write the daemon's process id to FILE once it takes signals, removed at exit "
                 "(`vlessbenchd reload --pid-file FILE` without systemd)");
  app.set_version_flag("--version", std::string("vlessbenchd ") + VLESSBENCH_VERSION);
  app.footer(exit_codes_help);
  links_command links;
  add_links_command(app, links);
  reload_command reload;
  add_reload_command(app, reload);
  auto* uuid = app.add_subcommand("uuid", "print a new random user UUID (version 4) for [[users]] uuid");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    (void)app.exit(e);
    return exit_usage;
  }

  if (*uuid) {
    std::cout << vlessbench::vless::format_uuid(vlessbench::vless::random_uuid()) << "\n";
    return 0;
  }

  if (*reload.cmd) {
    try {
      if (!reload.pid_file.empty()) reload.pid = read_pid_file(reload.pid_file);
    } catch (const std::exception& e) {
      std::cerr << "vlessbenchd reload: " << e.what() << "\n";
      return 1;
    }
    return reload_daemon(reload.config, reload.pid);
  }

  if (*links.cmd) {
    links.opts.qr = !links.no_qr;
    return print_links_of(links.config, links.ports, links.opts);
  }

  if (check_only) {
    if (config_file.empty()) {
      std::cerr << "vlessbenchd: --check needs --config FILE\n";
      return exit_usage;
    }
    return check(config_file, ports_file, true);
  }

  return start_daemon(config_file, ports_file, pid_path);
}

}  // namespace

// Anything run() does not handle itself (CLI11 set-up, out of memory) is reported, not std::terminate.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "vlessbenchd: error: " << e.what() << "\n";
    return 1;
  }
}
