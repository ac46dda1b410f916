// vlessbench_load: command line and what every mode shares (see load.hpp).
#include <algorithm>
#include <iostream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "load.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench::load {

tcp::endpoint endpoint_arg(std::string_view flag, const std::string& text) {
  tcp::endpoint ep;
  std::string reason;
  if (!parse_endpoint(text, ep, reason)) throw std::invalid_argument(std::string(flag) + " '" + text + "': " + reason);
  return ep;
}

vless::client_plan vless_plan(const endpoints& e, const tls::client_options& tls) {
  if (!e.tls_server.empty()) return vless::make_bare_tls_plan(endpoint_arg("--tls-server", e.tls_server), tls);
  const auto server = endpoint_arg("--server", e.server);
  const auto target = endpoint_arg("--target", e.target);
  const auto uuid = vless::parse_uuid(e.uuid);
  if (!uuid) throw std::invalid_argument("--uuid: not a UUID");
  auto plan =
      vless::make_client_plan(server, tls, vless::tcp_request(*uuid, target.address().to_string(), target.port()));
  if (!e.ws_path.empty()) {
    if (e.ws_path.front() != '/') throw std::invalid_argument("--ws-path: must start with '/'");
    plan.transport.kind = transport_kind::ws;
    plan.transport.path = e.ws_path;
  }
  return plan;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    out += ch;
  }
  return out;
}

}  // namespace vlessbench::load

namespace {

void add_endpoints(CLI::App& app, vlessbench::load::endpoints& e, bool server_required) {
  auto* server = app.add_option("--server", e.server, "VLESS+TLS server, HOST:PORT");
  auto* uuid = app.add_option("--uuid", e.uuid, "user UUID");
  auto* target = app.add_option("--target", e.target,
                                "HTTP target, HOST:PORT: the destination in the VLESS header (direct: dialled)");
  target->capture_default_str();
  app.add_option("--ws-path", e.ws_path, "VLESS over WebSocket on this path (TLS below; no early data)")->needs(server);
  auto* bare = app.add_option("--tls-server", e.tls_server,
                              "instead of --server: a bare TLS terminator (HAProxy) in front of the target, "
                              "HOST:PORT: TCP, TLS, then plain HTTP (no VLESS)")
                   ->excludes(server);
  if (!server_required)
    app.add_option("--http-proxy", e.http_proxy,
                   "instead of --server: HTTP proxy HOST:PORT, CONNECT to the target, then plain HTTP")
        ->excludes(server)
        ->excludes(bare);
  server->needs(uuid);
  if (server_required) {
    // One of the two: checked after parsing (CLI11 cannot say "exactly one of").
    app.callback([&e] {
      if (e.server.empty() && e.tls_server.empty()) throw CLI::RequiredError("--server or --tls-server");
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace load = vlessbench::load;
  CLI::App app{"vlessbench_load: load through a VLESS+TLS server (or straight to the target)"};
  app.require_subcommand(1);

  load::bench_options b;
  auto add_bench_mode = [&](const char* name, const char* what) {
    auto* sub = app.add_subcommand(name, what);
    add_endpoints(*sub, b.where, false);
    sub->add_option("--workers", b.workers, "concurrent connections (handshakes) or sessions (down/up)");
    sub->add_option("--threads", b.threads, "threads, one io_context each");
    sub->add_option("--seconds", b.seconds, "handshakes: run time; down/up: hard limit");
    sub->add_option("--bytes", b.bytes, "down/up: bytes per session");
    sub->add_option("--max", b.max_count, "handshakes: at most this many");
    sub->callback([&b, name] { b.mode = name; });
  };
  add_bench_mode("handshakes", "closed loop: connect, TLS, VLESS header + GET /generate_204, response head, close");
  add_bench_mode("down", "GET /bytes/N through each session, read it all");
  add_bench_mode("up", "POST /sink with N bytes through each session");
  auto* crypto = app.add_subcommand("crypto", "the handshake's public-key operations in the linked BoringSSL, us each");
  crypto->add_option("--max", b.max_count, "iterations (100..2000)");
  crypto->callback([&b] { b.mode = "crypto"; });

  load::session_options s;
  auto* sessions = app.add_subcommand(
      "sessions",
      "many concurrent VLESS+TLS sessions (idle ones held, active ones sending GETs); one JSON line when "
      "the idle sessions are open (\"ready\"), one at the end (\"done\")");
  add_endpoints(*sessions, s.where, true);
  sessions->add_option("--path", s.path, "request path")->capture_default_str();
  sessions->add_option("--idle", s.idle, "idle sessions to open and hold")->check(CLI::NonNegativeNumber);
  sessions->add_option("--active", s.active, "concurrent active sessions")->check(CLI::NonNegativeNumber);
  sessions->add_option("--requests", s.requests, "requests per active session (0: until --duration)")
      ->check(CLI::NonNegativeNumber);
  sessions->add_option("--duration", s.duration_s, "seconds of active traffic when --requests is 0");
  sessions->add_option("--reconnect-every", s.reconnect_every, "new session every K requests (0: keep it)");
  sessions->add_option("--opening", s.opening, "sessions being opened at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sessions->add_option("--hold", s.hold_s, "seconds to hold idle sessions (0: until stdin EOF)");
  sessions->add_option("--timeout", s.timeout_s, "seconds per operation")->capture_default_str();
  sessions->add_option("--pause-ms", s.pause_ms, "pause between an active session's requests");
  sessions->add_flag("--stop-on-close", s.stop_on_close,
                     "an active session the server closes (or that fails) stops instead of reconnecting");

  load::mux_echo_options m;
  auto* mux_echo = app.add_subcommand(
      "mux-echo",
      "ONE Mux.Cool connection (VLESS command 3), --subs concurrent TCP sub-connections to the echo server "
      "--dest, each sending --bytes of pseudo-random data while reading the echo; SHA-256 checked per sub. "
      "One JSON line per sub, one summary line; exit 1 on any mismatch or error");
  mux_echo->add_option("--server", m.server, "VLESS+TLS server, HOST:PORT")->required();
  mux_echo->add_option("--uuid", m.uuid, "user UUID")->required();
  mux_echo->add_option("--ws-path", m.ws_path, "VLESS over WebSocket on this path (TLS below; no early data)");
  mux_echo->add_option("--dest", m.dest, "TCP echo server, HOST:PORT: every sub's destination")->required();
  mux_echo->add_option("--subs", m.subs, "concurrent sub-connections")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  mux_echo->add_option("--bytes", m.bytes, "bytes each way, per sub")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  mux_echo->add_option("--udp-dest", m.udp_dest,
                       "also one XUDP sub to this [[udp_target]] echo, HOST:PORT: --udp-packets datagrams, "
                       "one at a time, each echo's trailer naming this session's sub");
  mux_echo->add_option("--udp-packets", m.udp_packets, "datagrams on the UDP sub")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  mux_echo->add_option("--seconds", m.seconds, "hard limit for the whole run")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (mux_echo->parsed()) return load::run_mux_echo(m);
    if (sessions->parsed()) {
      if (s.active > 0 && s.requests == 0 && s.duration_s <= 0) {
        std::cerr << "vlessbench_load: --active needs --requests or --duration\n";
        return 2;
      }
      return load::run_sessions(s);
    }
    b.workers = std::clamp(b.workers, 1, 10000);
    b.threads = std::clamp(b.threads, 1, 16);
    b.seconds = std::clamp(b.seconds, 0.1, 600.0);
    return load::run_bench(b);
  } catch (const std::exception& e) {
    std::cerr << "vlessbench_load: " << e.what() << "\n";
    return 2;
  }
}
