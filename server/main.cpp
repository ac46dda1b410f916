// vlessbenchd: VLESS listeners and the targets they reach, in one process (DESIGN.md §3).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#if defined(VLESSBENCH_INJECT_FAULT_RACE)
#include <thread>
#endif

#include <CLI/CLI.hpp>

#include "server/daemon.hpp"
#include "server/links.hpp"
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

int check(const std::string& file) {
  try {
    auto cfg = vlessbench::load_config_file(file);
    // What start or reload will open is checked too, without writing anything (the unit runs
    // --check before every start): a certificate to generate needs a folder the daemon can write.
    using state = vlessbench::tls::certificate_check::state;
    const auto cert = vlessbench::tls::check_certificate_files(cfg.tls);
    if (cert.result == state::problem) {
      std::cerr << file << ": " << cert.message << "\n";
      return 1;
    }
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
  std::cout << "ok\n";
  return 0;
}

// A broken file never reaches the daemon: `systemctl reload` fails with the reason instead.
int reload_daemon(const std::string& file, pid_t pid) {
  if (pid <= 1) {  // kill() would reach a process group, every process, or init
    std::cerr << "vlessbenchd reload: --pid " << pid << ": not a daemon's process id\n";
    return 2;
  }
  if (const int rc = check(file); rc != 0) return rc;
  if (::kill(pid, SIGHUP) != 0) {
    std::cerr << "vlessbenchd reload: SIGHUP to " << pid << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  return 0;
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

// `links`: the config's share links and client entries.
int do_links(const std::string& links_config, const std::string& links_ports,
             const vlessbench::links_options& links_opts) {
  try {
    auto cfg = vlessbench::load_config_file(links_config);
    if (!links_ports.empty()) resolve_from_ports_file(cfg, links_ports);
    vlessbench::print_links(std::cout, cfg, links_opts);
    return 0;
  } catch (const vlessbench::config_error& e) {
    for (const auto& err : e.errors()) std::cerr << "vlessbenchd: " << err << "\n";
  } catch (const std::exception& e) {
    std::cerr << "vlessbenchd links: " << e.what() << "\n";
  }
  return 1;
}

// The daemon itself, until a signal stops it.
int serve(const std::string& config_file, const std::string& ports_file) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    std::optional<std::filesystem::path> file;
    std::shared_ptr<const vlessbench::config> cfg;
    if (config_file.empty()) {
      cfg = std::make_shared<const vlessbench::config>(vlessbench::default_config());
    } else {
      file = config_file;
      cfg = std::make_shared<const vlessbench::config>(vlessbench::load_config_file(config_file));
    }
    vlessbench::setup_logging(cfg->log.level);
    inject_fault_at_start();
    vlessbench::daemon d(cfg, file);
    if (!ports_file.empty()) d.set_ports_file(ports_file);
    const int rc = d.run();
    inject_fault_at_exit();
    return rc;
  } catch (const vlessbench::config_error& e) {
    for (const auto& err : e.errors()) std::cerr << "vlessbenchd: " << err << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "vlessbenchd: error: " << e.what() << "\n";
    return 1;
  }
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
  app.set_version_flag("--version", std::string("vlessbenchd ") + VLESSBENCH_VERSION);
  auto* links = app.add_subcommand("links", "print share links, Clash/sing-box/v2ray entries and QR codes");
  std::string links_config;
  vlessbench::links_options links_opts;
  bool no_qr = false;
  links->add_option("-c,--config", links_config, "TOML config file")->required();
  links->add_option("--host", links_opts.host, "address clients use to reach this machine");
  links->add_option("--sni", links_opts.sni, "TLS server name the clients send")->capture_default_str();
  links->add_flag("--no-qr", no_qr, "omit the terminal QR codes");
  std::string links_ports;
  links->add_option("--ports-file", links_ports,
                    "the running daemon's --ports-file: the ports its port-0 listeners were given");
  // The unit's ExecReload: the daemon binary sends the signal itself, because /bin/kill (procps)
  // is not part of a minimal Debian install and systemd 252 has no Type=notify-reload.
  auto* reload = app.add_subcommand("reload", "check --config, then tell the daemon --pid to reload it (SIGHUP)");
  std::string reload_config;
  pid_t reload_pid = 0;
  reload->add_option("-c,--config", reload_config, "TOML config file the daemon runs with")->required();
  reload->add_option("--pid", reload_pid, "the daemon's process id (systemd: $MAINPID)")->required();
  auto* uuid = app.add_subcommand("uuid", "print a new random user UUID (version 4) for [[users]] uuid");
  CLI11_PARSE(app, argc, argv);

  if (*uuid) {
    std::cout << vlessbench::vless::format_uuid(vlessbench::vless::random_uuid()) << "\n";
    return 0;
  }

  if (*reload) return reload_daemon(reload_config, reload_pid);

  if (*links) {
    links_opts.qr = !no_qr;
    return do_links(links_config, links_ports, links_opts);
  }

  if (check_only) {
    if (config_file.empty()) {
      std::cerr << "vlessbenchd: --check needs --config FILE\n";
      return 2;
    }
    return check(config_file);
  }

  return serve(config_file, ports_file);
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
