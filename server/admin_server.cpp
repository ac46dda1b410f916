#include "server/admin_server.hpp"

#include <openssl/mem.h>
#include <openssl/sha.h>

#include <array>

#include "core/wire/http_parser.hpp"
#include "core/log/logging.hpp"
#include "core/wire/host_check.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/percent.hpp"
#include "core/net/watchdog.hpp"
#include "server/admin_log.hpp"
#include "server/admin_page.hpp"
#include "server/admin_views.hpp"

namespace vlessbench::admin {
namespace {

constexpr auto write_timeout = std::chrono::seconds(5);

request_token find_token(const http::request& req, std::string_view query) {
  if (auto auth = req.find("Authorization")) {
    constexpr std::string_view bearer = "Bearer ";
    if (auth->size() >= bearer.size() && http::iequals(auth->substr(0, bearer.size()), bearer))
      return {true, std::string(auth->substr(bearer.size()))};
    return {true, std::string()};  // another scheme: present, and wrong
  }
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto part = query.substr(0, amp);
    if (part.starts_with("token=")) return {true, percent_decode_lenient(part.substr(6))};
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

// For the human log: a value the client chose, without control characters or quotes.
std::string printable(std::string_view v) {
  std::string out(v);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == '"' || c == '\\') c = '?';
  return out;
}

std::string status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string response(int status, std::string_view content_type, std::string_view body, bool head_only,
                     std::string_view extra = {}) {
  std::string out = response_head(status, content_type, body.size(), extra);
  if (!head_only) out += body;
  return out;
}

}  // namespace

std::string response_head(int status, std::string_view content_type, std::optional<std::size_t> length,
                          std::string_view extra) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\n{}Cache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
      "Connection: close\r\n{}\r\n",
      status, status_text(status), content_type,
      length ? fmt::format("Content-Length: {}\r\n", *length) : std::string(), extra);
}

bool token_matches(std::string_view given, std::string_view expected) {
  std::array<std::uint8_t, SHA256_DIGEST_LENGTH> a{}, b{};
  SHA256(reinterpret_cast<const std::uint8_t*>(given.data()), given.size(), a.data());
  SHA256(reinterpret_cast<const std::uint8_t*>(expected.data()), expected.size(), b.data());
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::shared_ptr<tcp::acceptor> admin_server::bind(const tcp::endpoint& ep) {
  auto a = std::make_shared<tcp::acceptor>(io_);
  std::error_code ec;
  a->open(ep.protocol(), ec);
  if (!ec) a->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && ep.address().is_v6()) a->set_option(asio::ip::v6_only(true), ec);
  if (!ec) a->bind(ep, ec);
  if (!ec) a->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error(fmt::format("admin listener cannot listen on {}: {}", format_endpoint(ep), ec.message()));
  return a;
}

void admin_server::serve(std::shared_ptr<tcp::acceptor> acceptor) {
  close();
  acceptor_ = std::move(acceptor);
  std::error_code ec;
  const auto ep = acceptor_->local_endpoint(ec);
  const auto cfg = ctx_.cfg();
  spdlog::info("admin listener on {} (dashboard, /api/state, /metrics{})", format_endpoint(ep),
               cfg->admin.token.empty() ? "" : "; token required");
  asio::co_spawn(io_, accept_loop(acceptor_), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("admin accept loop: unexpected exception: {}", ex.what());
    }
  });
}

void admin_server::close() {
  if (!acceptor_) return;
  std::error_code ignored;
  acceptor_->close(ignored);
  acceptor_.reset();
}

awaitable<void> admin_server::accept_loop(std::shared_ptr<tcp::acceptor> acceptor) {
  asio::steady_timer backoff(io_);
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(as_tuple_awaitable);
    if (!acceptor->is_open() || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(as_tuple_awaitable);
      continue;
    }
    // A refused socket closes as it goes out of scope.
    std::error_code rec;
    const auto remote = socket.remote_endpoint(rec);
    if (rec) continue;
    const auto source = unmapped(remote.address());
    const auto cfg = ctx_.cfg();
    const admin_config& limits = cfg->admin;
    if (connections_ >= limits.max_connections) {
      refused("connection_cap", format_endpoint(remote), "admin connections at their cap");
      continue;
    }
    auto& from_source = per_source_[source];
    if (from_source >= limits.max_connections_per_client) {
      refused("source_cap", format_endpoint(remote),
              fmt::format("{} admin connections open from this address already", from_source));
      continue;
    }
    ++from_source;
    ++connections_;
    std::size_t evicted = 0;
    auto ticket = pending_->admit(io_.get_executor(), limits.max_pending, &evicted);
    for (std::size_t i = 0; i < evicted; ++i)
      refused("evicted", "the oldest pending connection", "closed to admit " + format_endpoint(remote));
    asio::co_spawn(io_, handle(pending_, std::move(socket), std::move(ticket), limits.header_timeout),
                   [this, source](std::exception_ptr e) {
                     --connections_;
                     if (auto it = per_source_.find(source); it != per_source_.end() && --it->second == 0)
                       per_source_.erase(it);
                     if (!e) return;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       spdlog::error("admin connection: unexpected exception: {}", ex.what());
                     }
                   });
  }
}

void admin_server::refused(std::string_view reason, std::string_view peer, std::string_view detail) {
  ctx_.hub.admin_refused(reason);
  auto it = notes_.find(reason);
  if (it == notes_.end()) it = notes_.emplace(std::string(reason), refusal_note{}).first;
  auto& n = it->second;
  ++n.since;
  const auto now = steady_clock::now();
  if (n.last != steady_clock::time_point{} && now - n.last < std::chrono::seconds(1)) return;
  spdlog::info("admin: refused {} ({}): {} ({} since the last such line)", peer, reason, detail, n.since);
  n.last = now;
  n.since = 0;
}

void admin_server::log_refusal(const std::string& peer, std::string_view why) {
  ++refused_since_warning_;
  const auto now = steady_clock::now();
  if (now - last_refusal_warning_ < std::chrono::seconds(1)) return;
  spdlog::warn("admin: 401 to {}: {} ({} refusal(s) since the last warning)", peer, why, refused_since_warning_);
  last_refusal_warning_ = now;
  refused_since_warning_ = 0;
}

awaitable<void> admin_server::handle(std::shared_ptr<pending_set> set, tcp::socket socket, pending_set::ticket admitted,
                                     std::chrono::milliseconds head_timeout) {
  pending_set::ticket ticket = std::move(admitted);  // leaves before the socket closes
  (void)set;                                         // only kept alive
  std::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? std::string("?") : format_endpoint(remote);
  const auto local = socket.local_endpoint(ec);
  if (!ticket.arm([&socket] {
        std::error_code ignored;
        socket.close(ignored);
      }))
    co_return;  // evicted before it ran
  watchdog_deadline deadline;
  deadline = steady_clock::now() + head_timeout;
  answer a;
  co_await (answer_head(socket, ticket, peer, local.address(), a) || watchdog(deadline, [&] {
              std::error_code ignored;
              socket.close(ignored);
            }));
  ticket.leave();
  if (a.log_request && socket.is_open()) {
    ++log_streams_;
    struct release {
      std::size_t& n;
      ~release() { --n; }
    } guard{log_streams_};
    co_await stream_log(socket, a.log_file, *a.log_request, a.log_head);
    std::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    co_return;
  }
  if (a.reply.empty() || !socket.is_open()) co_return;
  deadline = steady_clock::now() + write_timeout;
  co_await ([&]() -> awaitable<void> {
    auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(a.reply), as_tuple_awaitable);
    (void)wec;
    (void)wn;
    socket.shutdown(tcp::socket::shutdown_send, ec);
  }() || watchdog(deadline, [&] {
                       std::error_code ignored;
                       socket.close(ignored);
                     }));
}

awaitable<void> admin_server::answer_head(tcp::socket& socket, pending_set::ticket& ticket, const std::string& peer,
                                          asio::ip::address local, answer& out) {
  std::string buf;
  std::array<char, 4096> chunk{};
  parse_result<http::request> parsed;
  for (;;) {
    parsed = http::parse_request(buf);
    if (!parsed.need_more()) break;
    auto [rec, n] = co_await socket.async_read_some(asio::buffer(chunk), as_tuple_awaitable);
    if (rec) co_return;
    buf.append(chunk.data(), n);
  }
  if (parsed.invalid()) {
    const bool too_large = parsed.reason == "header too large" || parsed.reason == "too many headers";
    out.reply = response(too_large ? 431 : 400, "text/plain", "bad request\n", false);
    co_return;
  }
  const http::request& req = parsed.value;
  const std::string_view target = req.target;
  const auto mark = target.find('?');
  const std::string_view path = target.substr(0, mark);
  const std::string_view query = mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
  const auto cfg = ctx_.cfg();
  if (auto refusal = refuse_request(req, query, peer, local, *cfg)) {
    out.reply = std::move(*refusal);
    co_return;
  }
  ticket.leave();  // authenticated: never evicted from now on
  out = route_request(req, path, query, *cfg);
}

std::optional<std::string> admin_server::refuse_request(const http::request& req, std::string_view query,
                                                        const std::string& peer, const asio::ip::address& local,
                                                        const config& cfg) {
  const bool head = req.method == "HEAD";
  const auto host = req.find("Host");
  if (!host && req.version_minor >= 1) {
    refused("missing_host", peer, "HTTP/1.1 request without Host");
    return response(400, "text/plain", "Host header required\n", head);
  }
  if (host && !host_names_listener(*host, local, cfg.admin.hosts)) {
    refused("misdirected_host", peer,
            fmt::format("Host \"{}\" names neither this listener's address, localhost nor [admin] hosts",
                        printable(host->substr(0, 256))));
    return response(421, "text/plain",
                    "misdirected request: Host must be this listener's address, localhost or a name in "
                    "[admin] hosts\n",
                    head);
  }
  if (!cfg.admin.token.empty()) {
    const request_token t = find_token(req, query);
    if (!t.present || !token_matches(t.value, cfg.admin.token)) {
      ctx_.hub.admin_refused("unauthorized");
      log_refusal(peer, t.present ? "wrong token" : "no token");
      return response(401, "text/plain",
                      "admin token required (Authorization: Bearer TOKEN or "
                      "?token=TOKEN)\n",
                      head, "WWW-Authenticate: Bearer realm=\"vlessbench\"\r\n");
    }
  }
  return std::nullopt;
}

admin_server::answer admin_server::route_request(const http::request& req, std::string_view path,
                                                 std::string_view query, const config& cfg) {
  const bool head = req.method == "HEAD";
  answer out;
  if (req.method != "GET" && !head) {
    out.reply = response(405, "text/plain", "read-only: GET only\n", false, "Allow: GET, HEAD\r\n");
  } else if (req.content_length > 0) {
    out.reply = response(413, "text/plain", "no request bodies\n", false);
  } else if (path == "/") {
    out.reply = response(200, "text/html; charset=utf-8", dashboard_page(), head,
                         "Content-Security-Policy: " + std::string(dashboard_csp()) + "\r\n");
  } else if (path == "/api/state" || path == "/metrics") {
    hub_snapshot s = ctx_.hub.snapshot();
    if (ctx_.fill_gauges) ctx_.fill_gauges(s);
    if (path == "/metrics")
      out.reply = response(200, "text/plain; version=0.0.4; charset=utf-8", format_metrics(s, ctx_.version), head);
    else
      out.reply = response(200, "application/json", format_state_json(s, ctx_.version), head);
  } else if (path == "/api/log") {
    const auto q = parse_log_query(query);
    if (q.invalid()) {
      out.reply = response(400, "text/plain", fmt::format("bad /api/log query: {}\n", q.reason), head);
    } else if (const auto why = log_unreadable(cfg.log.access)) {
      out.reply = response(409, "text/plain", *why, head);
    } else if (log_streams_ >= max_log_streams) {
      out.reply =
          response(503, "text/plain",
                   fmt::format("{} /api/log answers are streaming already: try again when they end\n", log_streams_),
                   head, "Retry-After: 5\r\n");
    } else {
      out.log_request = q.value;
      out.log_file = cfg.log.access;
      out.log_head = head;
    }
  } else {
    out.reply = response(404, "text/plain", "not found: /, /api/state, /metrics, /api/log?run=ID\n", head);
  }
  return out;
}

}  // namespace vlessbench::admin
