#pragma once
// The admin listener ([admin], docs/dashboard.md): GET / (the dashboard page),
// GET /api/state (JSON the page polls every second) and GET /metrics
// (Prometheus text format). Read-only; one request per connection, answered
// with Connection: close. Runs on the daemon's main io_context and reads the
// running config's token there, so a reload's new token applies to the next
// request.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/net/asio_compat.hpp"
#include "core/config/config.hpp"
#include "core/runtime/pending_set.hpp"
#include "core/log/state_hub.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/log_query.hpp"

namespace vlessbench::admin {

// What a request may be answered with: the hub, the gauges the daemon reads
// when asked, the running config (its token), the build version.
struct admin_context {
  state_hub& hub;
  std::function<void(hub_snapshot&)> fill_gauges;
  std::function<std::shared_ptr<const config>()> cfg;
  std::string version;
};

// Every answer's head: Connection: close, no caching, no sniffing, no framing. Without a length the
// body ends when the connection does (GET /api/log's stream).
std::string response_head(int status, std::string_view content_type, std::optional<std::size_t> length,
                          std::string_view extra = {});

// Constant time in the tokens' contents: both are hashed, the digests compared
// with CRYPTO_memcmp.
bool token_matches(std::string_view given, std::string_view expected);

// The token a request carries: "Authorization: Bearer T" or the query's
// token=T; empty if none.
struct request_token {
  bool present = false;
  std::string value;
};

// Admission (docs/dashboard.md): a connection is pending until its request head is complete and
// has passed the Host and token checks. Pending ones are bounded as core/runtime/pending_set.hpp bounds
// VLESS connections (the oldest evicted at the cap), so that silent or half-sent connections can
// never keep an authenticated scrape out; each source address holds a share of the connections.
// The caps and the head deadline are the running config's [admin] keys (admin_config), read per
// accepted connection.

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
  // set: held by the connection's frame so that it outlives the ticket, even when ~io_context
  // destroys a connection still pending after the server is gone (a stop during a half-sent head).
  awaitable<void> handle(std::shared_ptr<pending_set> set, tcp::socket socket, pending_set::ticket admitted,
                         std::chrono::milliseconds head_timeout);
  // A request's answer: a reply, or GET /api/log's stream once the head phase is over.
  struct answer {
    std::string reply;
    std::optional<log_query> log_request;
    std::string log_file;
    bool log_head = false;
  };
  // The head phase: read the request head, check its Host and token, route it.
  awaitable<void> answer_head(tcp::socket& socket, pending_set::ticket& ticket, const std::string& peer,
                              asio::ip::address local, answer& out);
  // The Host and token checks: the refusal's reply, or nothing when the request may go on.
  std::optional<std::string> refuse_request(const http::request& req, std::string_view query, const std::string& peer,
                                            const asio::ip::address& local, const config& cfg);
  answer route_request(const http::request& req, std::string_view path, std::string_view query, const config& cfg);
  void log_refusal(const std::string& peer, std::string_view why);
  // Counted in /metrics by reason; one info line per reason per second, with the count.
  void refused(std::string_view reason, std::string_view peer, std::string_view detail);

  asio::io_context& io_;
  admin_context ctx_;
  std::shared_ptr<tcp::acceptor> acceptor_;
  std::size_t connections_ = 0;
  std::size_t log_streams_ = 0;  // GET /api/log answers streaming now
  std::map<asio::ip::address, std::size_t> per_source_;
  std::shared_ptr<pending_set> pending_ = std::make_shared<pending_set>();
  std::uint64_t refused_since_warning_ = 0;
  std::chrono::steady_clock::time_point last_refusal_warning_{};
  struct refusal_note {
    std::uint64_t since = 0;
    std::chrono::steady_clock::time_point last{};
  };
  std::map<std::string, refusal_note, std::less<>> notes_;
};

}  // namespace vlessbench::admin
