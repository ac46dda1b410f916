#pragma once
// vlessbench_load: the one load generator. Its modes share the core VLESS client
// (core/client/vless_client.hpp), the one HOST:PORT parser and the one quantile:
//   handshakes | down | up | crypto  (bench_modes.cpp, driven by bench/run.py)
// Every mode but crypto and mux-echo also goes through a bare TLS terminator (--tls-server): the
// floor bench/run.py measures with HAProxy, with the same client code as the VLESS sessions.
//   mux-echo                         (mux_echo.cpp: N TCP subs of one Mux.Cool connection, each
//                                     echoing BYTES with SHA-256 checked; tests/integration/test_mux.py)
//   sessions                         (sessions.cpp: idle and active VLESS sessions held against
//                                     vlessbenchd; tests/load/loadkit.py and bench/run.py's RSS phase)
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/net/asio_compat.hpp"
#include "core/net/tls.hpp"
#include "core/client/vless_client.hpp"

namespace vlessbench::load {

using clock = std::chrono::steady_clock;

// Where sessions go: the VLESS+TLS server (empty: straight to the target, bench modes only),
// the user, and the destination the VLESS header names.
struct endpoints {
  std::string server;
  std::string target = "127.0.0.1:8080";
  std::string uuid;
  std::string ws_path;  // non-empty: VLESS over WebSocket (over TLS) on this path, no early data
  // Bench modes only, instead of server: an HTTP proxy (HOST:PORT) asked to CONNECT to the target,
  // e.g. a v2ray client's http inbound, so the bulk runs can go through its Mux.Cool outbound.
  std::string http_proxy;
  // Instead of server: a bare TLS terminator (HAProxy in TCP mode) in front of the target, HOST:PORT:
  // TCP connect, TLS handshake by the same client code, then plain HTTP; no VLESS header.
  std::string tls_server;
};

// --flag HOST:PORT (an address literal) -> endpoint; throws std::invalid_argument "--flag: reason".
tcp::endpoint endpoint_arg(std::string_view flag, const std::string& text);
// The VLESS client plan for e (server, user, target) with these TLS options, or with
// e.tls_server the bare TLS plan to it (no header); throws std::invalid_argument with a reason for
// a bad address or UUID.
vless::client_plan vless_plan(const endpoints& e, const tls::client_options& tls);

std::string json_escape(std::string_view s);

struct bench_options {
  std::string mode;  // handshakes | down | up | crypto
  endpoints where;
  int workers = 1;  // concurrent connections (handshakes) or sessions (down/up)
  int threads = 1;
  double seconds = 5;                // handshakes: run time; others: hard limit
  std::uint64_t bytes = 1ull << 30;  // down/up: per session
  std::uint64_t max_count = 1'000'000;
};
int run_bench(const bench_options& o);

struct session_options {
  endpoints where;
  std::string path = "/generate_204";
  int idle = 0;
  int active = 0;
  int requests = 0;
  double duration_s = 0;
  int reconnect_every = 0;
  int opening = 200;
  double hold_s = 0;
  double timeout_s = 10;
  double pause_ms = 0;
  bool stop_on_close = false;
};
int run_sessions(const session_options& o);

struct mux_echo_options {
  std::string server;  // VLESS+TLS server, HOST:PORT
  std::string uuid;
  std::string ws_path;
  std::string dest;  // the echo destination every sub's New frame names, HOST:PORT
  int subs = 8;
  std::uint64_t bytes = 16u << 20;  // each way, per sub
  double seconds = 60;              // hard limit for the whole run
  std::string udp_dest;             // non-empty: also one XUDP sub to this UDP echo ([[udp_target]])
  std::uint64_t udp_packets = 100;  // datagrams on it, one at a time
};
int run_mux_echo(const mux_echo_options& o);

}  // namespace vlessbench::load
