#pragma once
// One connection of one path, opened the way that path's client would open it (direct TCP, HTTP
// CONNECT, SOCKS5, or TLS + VLESS with the built-in control client), then used for GETs. Every
// path reads responses with the same code (exchange), so per-sample overhead does not differ.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/route_header.hpp"
#include "core/client/vless_client.hpp"
#include "runner/failure.hpp"
#include "runner/inner_tls.hpp"
#include "runner/mux_tunnel.hpp"
#include "runner/op_deadline.hpp"
#include "runner/path_spec.hpp"

namespace vlessbench::runner {

// Everything a path needs per connection, prepared once before measuring so name resolution and
// TLS context setup never fall inside a sample.
struct path_plan {
  const path_spec* spec = nullptr;
  std::optional<tcp::endpoint> entry;  // target, proxy or VLESS server
  std::string entry_error;             // why entry is missing ("resolve: ...")
  std::string target_authority;        // host:port of the HTTP target
  std::string target_host;             // the target as given (SOCKS5 UDP headers name it)
  std::uint16_t target_port = 0;
  std::string proxy_request;  // CONNECT request or SOCKS5 CONNECT request
  // vless paths: TLS context, header, socket policy; for udp:// and dns:// targets the header
  // asks for the UDP command (2) to the target. tls paths: the same client, no header.
  vless::client_plan vless;
  // https:// targets: the inner TLS session's context (no certificate check: the daemon's
  // certificate is self-signed; what is measured is the handshake's cost, not its trust).
  std::shared_ptr<asio::ssl::context> inner_tls_context;
  tls::client_options inner_tls;
  // vless paths with mux=on: the path's shared mux connection (vless then holds the command 3
  // header); the plan is const to tunnels, what it points to is not.
  std::shared_ptr<mux_path> mux;
  // xhttp paths over h2: the HTTP/2 connection reused samples share, each a new XHTTP session on
  // it (Xray's XMUX); nullptr until the first reused sample needs it.
  struct xmux_path {
    std::shared_ptr<xhttp::h2_connection> shared;
    std::uint64_t connections = 0;
  };
  std::shared_ptr<xmux_path> xmux;
};

// Resolves and prepares; never throws for network reasons (the reason lands in entry_error and
// every sample of the path fails with it).
path_plan make_plan(asio::io_context& io, const path_spec& spec, const target_url& target,
                    const vless_client_options& defaults);

struct exchange_result {
  maybe_failure error;  // none: a complete response was read
  std::optional<http::response> head;
};

class tunnel : public std::enable_shared_from_this<tunnel> {
 public:
  using clock = std::chrono::steady_clock;

  tunnel(asio::any_io_executor ex, const path_plan& plan, std::chrono::milliseconds timeout);
  ~tunnel();
  tunnel(const tunnel&) = delete;
  tunnel& operator=(const tunnel&) = delete;

  // Starts the watchdog for the operations that follow; call before starting a clock so the
  // timer work stays outside the measurement. Each operation then gets `timeout` from its start.
  void arm();
  void disarm();

  // Before the clock, after arm(): on a mux path, the shared mux connection (made or remade
  // here) and its queued End frames; nothing on other paths, and nothing for a new-connection
  // sample under muxnew=connection (its own mux connection is part of what it measures).
  awaitable<maybe_failure> prepare(bool new_connection);
  // TCP connect plus the path's setup. On a mux path
  // after prepare() nothing goes on the wire: the sub's New frame goes with the first write.
  awaitable<maybe_failure> open();
  // https:// targets, after open(): the TLS handshake with the target inside the tunnel; every
  // later read and write goes through that session.
  awaitable<maybe_failure> start_tls();
  // Writes the request (after the VLESS header when it is still pending), then upload_bytes of
  // body (POST /sink), and reads one whole response: head, then exactly Content-Length body bytes.
  awaitable<exchange_result> exchange(const std::string& request, std::uint64_t upload_bytes = 0);
  // banner:// targets, after open(): reads the server's first line; first_byte is when its first
  // byte arrived. A VLESS path that has not written yet sends its header alone first (the
  // built-in client does not wait for the application).
  awaitable<maybe_failure> read_banner(banner_line& out, clock::time_point& first_byte);
  // banner:// reuse: writes line and reads the same number of bytes back.
  awaitable<maybe_failure> echo(std::string_view line);

  // The path's RTT as the kernel measured it on this tunnel's own TCP connection (TCP_INFO
  // min_rtt), ms, when that connection goes to the path's server: direct, tcp://, tls:// and
  // vless:// without mux (a proxy's entry or a TUN is not the path). Before close().
  std::optional<double> path_rtt_ms();

  // xhttp over h2: the sample's session rode an HTTP/2 connection that carried sessions before.
  bool rode_shared_h2() const { return vless_ && vless_->xhttp() && vless_->xhttp()->rode_shared(); }

  bool reusable() const { return open_ && reusable_ && (!mux_ || mux_->usable()); }
  void close();

 private:
  void touch(const char* phase);
  std::string describe(const std::error_code& ec) const;
  // Through the VLESS client on vless paths, else on the socket; these two only pick the
  // awaitable (no coroutine frame of their own), so every path pays the same per operation.
  awaitable<std::error_code> write_all(std::string_view data);
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n);
  // The tunnel's own byte stream, under the inner TLS session when there is one.
  awaitable<std::error_code> raw_write_all(std::string_view data);
  awaitable<std::error_code> raw_read_some(char* data, std::size_t size, std::size_t& n);
  awaitable<std::error_code> socket_write_all(std::string_view data);
  awaitable<std::error_code> socket_read_some(char* data, std::size_t size, std::size_t& n);
  awaitable<std::error_code> read_more();  // appends to in_
  awaitable<maybe_failure> read_proxy_reply();
  awaitable<maybe_failure> mux_connect();  // mux_: TCP, TLS, header alone
  awaitable<maybe_failure> prepare_xmux();
  awaitable<std::error_code> mux_open(std::string_view data);  // the sub's New frame with data

  const path_plan& plan_;
  tcp::socket socket_;
  std::optional<vless::client> vless_;  // vless paths, and tls paths (a bare TLS plan: no header)
  std::unique_ptr<inner_tls> tls_;      // https:// targets, after start_tls()
  bool wrote_ = false;                  // anything written since open()
  op_deadline deadline_;
  bool open_ = false;
  bool reusable_ = true;
  std::string in_;  // received, not yet consumed
  std::unique_ptr<char[]> scratch_;
  std::shared_ptr<mux::connection> mux_;        // mux paths: the connection this tunnel's sub is on
  std::shared_ptr<xhttp::h2_connection> xmux_;  // xhttp h2 paths, reused samples: the shared connection
  bool owns_mux_ = false;                       // muxnew=connection: closed with the tunnel
  bool sub_open_ = false;                       // the New frame went out: sub_ is ours to End
  std::uint16_t sub_ = 0;
};

}  // namespace vlessbench::runner
