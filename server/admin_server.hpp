#pragma once
// The admin listener ([admin], docs/dashboard.md): GET / (the dashboard page),
// GET /api/state (JSON the page polls every second) and GET /metrics
// (Prometheus text format). Read-only; one request per connection, answered
// with Connection: close. Runs on the daemon's main io_context and reads the
// running config's token there, so a reload's new token applies to the next
// request.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/asio_compat.hpp"
#include "core/config.hpp"
#include "core/state_hub.hpp"

namespace vlessbench::admin {

// What a request may be answered with: the hub, the gauges the daemon reads
// when asked, the running config (its token), the build version.
struct admin_context {
  state_hub& hub;
  std::function<void(hub_snapshot&)> fill_gauges;
  std::function<std::shared_ptr<const config>()> cfg;
  std::string version;
};

// Constant time in the tokens' contents: both are hashed, the digests compared
// with CRYPTO_memcmp.
bool token_matches(std::string_view given, std::string_view expected);

// The token a request carries: "Authorization: Bearer T" or the query's
// token=T; empty if none.
struct request_token {
  bool present = false;
  std::string value;
};

class admin_server {
 public:
  admin_server(asio::io_context& io, admin_context ctx) : io_(io), ctx_(std::move(ctx)) {}
  // Binds and listens (throws std::runtime_error naming the endpoint); serve()
  // starts it.
  std::shared_ptr<tcp::acceptor> bind(const tcp::endpoint& ep);
  // Closes the running acceptor, if any, and accepts on this one.
  void serve(std::shared_ptr<tcp::acceptor> acceptor);
  void close();
  bool running() const { return acceptor_ != nullptr; }

 private:
  awaitable<void> accept_loop(std::shared_ptr<tcp::acceptor> acceptor);
  awaitable<void> handle(tcp::socket socket);
  void log_refusal(const std::string& peer, std::string_view why);

  static constexpr std::size_t max_connections = 64;
  asio::io_context& io_;
  admin_context ctx_;
  std::shared_ptr<tcp::acceptor> acceptor_;
  std::size_t connections_ = 0;
  std::uint64_t refused_since_warning_ = 0;
  std::chrono::steady_clock::time_point last_refusal_warning_{};
};

}  // namespace vlessbench::admin
