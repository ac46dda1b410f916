#include "target/http_target.hpp"

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

#include "core/log/access_events.hpp"
#include "core/net/delivery_watch.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/net_address.hpp"
#include "core/log/logging.hpp"
#include "core/net/policy_stream.hpp"
#include "target/index_page.hpp"
#include "target/probe_page.hpp"
#include "target/request_handler.hpp"
#include "core/wire/route_header.hpp"
#include "core/net/tcp_info.hpp"
#include "core/net/tls.hpp"
#include "core/net/watchdog.hpp"

namespace vlessbench::target {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;  // a /sink body read; a generated-body write
// A connection's head buffer starts (and, once idle, shrinks back to) this size and grows only for
// a larger head or a pipelined burst: an idle keep-alive connection holds 4 KiB, not 64.
constexpr std::size_t head_chunk = 4 * 1024;
constexpr std::size_t max_label = 128;  // cap on run/seq/path labels copied into the log

const std::array<char, read_chunk>& pattern_block() {
  static const auto block = [] {
    std::array<char, read_chunk> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + i % 26);
    return b;
  }();
  return block;
}

std::string endpoint_text(const tcp::endpoint& ep) { return format_endpoint(ep); }

// GET / from a browser: the daemon's page for this target and Host, or 421 when, with links on,
// the Host names neither this target nor a configured name (target_context::index).
void plan_index_page(response_plan& plan, const target_context& ctx, std::string_view listener,
                     const http::request& req, const asio::ip::address& local) {
  const auto index = ctx.index(listener, req.find("Host"), local);
  if (!index.misdirected && index.page) {
    plan.body = *index.page;
    return;
  }
  const bool head_only = plan.head_only;
  plan = error_response(421,
                        "misdirected request: Host must be this target's address, localhost, a name in "
                        "[admin] hosts or its index_host");
  plan.head_only = head_only;
  plan.note = "misdirected_host";
}

// A policy_stream that counts what it reads: under TLS, how much a peer sent before its
// handshake failed (target.reject's bytes_seen).
class counted_stream {
 public:
  using executor_type = policy_stream::executor_type;
  using lowest_layer_type = policy_stream::lowest_layer_type;
  explicit counted_stream(policy_stream next) : next_(std::move(next)) {}
  executor_type get_executor() { return next_.get_executor(); }
  lowest_layer_type& lowest_layer() { return next_.lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return next_.lowest_layer(); }
  tcp::socket& socket() { return next_.socket(); }
  std::uint64_t bytes_read() const { return read_; }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return asio::async_compose<ReadToken, void(std::error_code, std::size_t)>(
        [this, buffers, started = false](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          if (!started) {
            started = true;
            next_.async_read_some(buffers, std::move(self));
            return;
          }
          read_ += n;
          self.complete(ec, n);
        },
        token, next_.socket());
  }
  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return next_.async_write_some(buffers, std::forward<WriteToken>(token));
  }

 private:
  policy_stream next_;
  std::uint64_t read_ = 0;
};

using tls_target_stream = asio::ssl::stream<counted_stream>;

tcp::socket& raw_socket(policy_stream& s) { return s.socket(); }
tcp::socket& raw_socket(tls_target_stream& s) { return s.next_layer().socket(); }

// One connection of the HTTP target, plain (Stream = policy_stream) or HTTPS (tls_target_stream:
// the TLS handshake first, then the very same request loop).
template <class Stream>
struct connection {
  static constexpr bool is_tls = std::is_same_v<Stream, tls_target_stream>;
  target_context& ctx;
  std::shared_ptr<listener_runtime> listener;
  Stream stream;
  std::string peer;
  flow_id id;  // this connection's identity: its peer and our local endpoint
  // Looked up at the first request head and kept: a connection is one flow for its whole life, so
  // its route cannot change, and the session's entry may be gone before a late request is read.
  std::optional<std::shared_ptr<const route_info>> route_found;
  std::vector<char> buf;  // received, unparsed bytes: [0, used)
  std::size_t used = 0;
  watchdog_deadline deadline;
  bool busy = false;            // between a complete request head and the end of its response
  pending_set::ticket pending;  // until the first request head is complete
  steady_clock::time_point accepted = steady_clock::now();
  // While a body is being received: when the next min_rate_bytes are due ([limits] min_rate_*).
  steady_clock::time_point rate_due = steady_clock::time_point::max();
  bool slow = false;  // closed by the rate rule
  // While a response is written: the idle deadline, and whether a write is waiting on the peer
  // (the minimum-rate rule samples what the peer has acknowledged, as the relay does).
  steady_clock::time_point write_idle_at = steady_clock::time_point::max();
  bool writing = false;
  delivery_watch to_peer{};
  bool handshaking = is_tls;  // a TLS target before its handshake completed
  std::string ja4;            // HTTPS: the client's TLS fingerprint, read once its handshake completed

  limits_config limits() const { return ctx.limits(); }

  // Before its first request a connection proves nothing: its deadlines never pass the pending one.
  steady_clock::time_point head_deadline(steady_clock::time_point t) const {
    return pending.pending() ? std::min(t, accepted + limits().pending_timeout) : t;
  }

  // A body in progress must bring min_rate_bytes every min_rate_window; each time it has, the
  // window starts again. An idle keep-alive connection has no body in progress: only
  // idle_timeout applies to it.
  struct rate_window {
    std::uint64_t need = 0;  // 0: no rate rule
    std::chrono::milliseconds window{0};
    std::uint64_t got = 0;
  };
  rate_window start_rate() {
    const auto l = limits();
    rate_window w{l.min_rate_bytes, l.min_rate_window, 0};
    rate_due = w.need > 0 ? steady_clock::now() + w.window : steady_clock::time_point::max();
    return w;
  }
  void count_rate(rate_window& w, std::size_t n) {
    if (w.need == 0) return;
    w.got += n;
    if (w.got >= w.need) {
      w.got = 0;
      rate_due = steady_clock::now() + w.window;
    }
  }
  void end_rate() { rate_due = steady_clock::time_point::max(); }
  // The connection's deadline while a body is read: idle or rate, whichever comes first.
  void arm_body_deadline() { deadline = std::min(steady_clock::now() + limits().idle_timeout, rate_due); }

  // Before each response write: idle_timeout for the write, and a rate sample within a window.
  void arm_write_deadline() {
    const auto l = limits();
    const auto now = steady_clock::now();
    write_idle_at = now + l.idle_timeout;
    deadline = l.min_rate_bytes > 0 ? std::min(write_idle_at, now + l.min_rate_window) : write_idle_at;
  }

  // The watchdog's deadline passed; true: close. A response write that waits on the peer is
  // sampled once per window and closed as slow when the peer took less than min_rate_bytes over
  // a whole window; a body read behind its rate is slow too; anything else is a plain timeout.
  bool on_deadline() {
    const auto l = limits();
    const auto now = steady_clock::now();
    if (handshaking) {
      if constexpr (is_tls) reject_handshake("handshake_timeout", {});
      handshaking = false;
      close();
      return true;
    }
    if (writing && l.min_rate_bytes > 0 && now < write_idle_at) {
      const auto acked = read_bytes_acked(raw_socket(stream).native_handle()).value_or(0);
      if (to_peer.on_window(true, acked, l.min_rate_bytes)) {
        deadline = std::min(write_idle_at, now + l.min_rate_window);
        return false;
      }
      slow = true;
    } else {
      slow = rate_due <= deadline.at();
    }
    close();
    return true;
  }

  void close() {
    std::error_code ignored;
    raw_socket(stream).close(ignored);
  }

  std::string client_ja4() {
    if constexpr (is_tls) {
      return tls::ja4_received(stream.native_handle());
    } else {
      return {};
    }
  }

  void reject_handshake(std::string_view reason, std::string_view detail) {
    ctx.log.write(format_event(target_reject_event{
        .listener = listener->name,
        .peer = peer,
        .reason = reason,
        .bytes_seen = stream.next_layer().bytes_read(),
        .detail = detail,
        .duration_us = std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - accepted).count(),
        .ja4 = client_ja4()}));
  }

  // The TLS handshake, bounded by [limits] handshake_timeout (and the pending deadline); a failure
  // is a target.reject line with the TLS library's reason.
  awaitable<bool> handshake() {
    deadline = head_deadline(steady_clock::now() + limits().handshake_timeout);
    auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, as_tuple_awaitable);
    if (!handshaking) co_return false;  // the deadline logged it
    handshaking = false;
    if (ec) {
      // A peer that connected and left without a byte is no TLS garbage: nothing to report.
      if (stream.next_layer().bytes_read() > 0) reject_handshake("tls_handshake_failed", ec.message());
      co_return false;
    }
    ja4 = client_ja4();
    co_return true;
  }

  // Reads more bytes into buf; returns 0 on EOF/error.
  awaitable<std::size_t> read_more() {
    if (buf.size() - used < head_chunk / 2) buf.resize(std::max(buf.size() * 2, used + head_chunk));
    auto [ec, n] =
        co_await stream.async_read_some(asio::buffer(buf.data() + used, buf.size() - used), as_tuple_awaitable);
    if (ec) co_return 0;
    used += n;
    co_return n;
  }

  void consume(std::size_t n) {
    std::memmove(buf.data(), buf.data() + n, used - n);
    used -= n;
  }

  // One gather write: head and first body bytes leave in one segment where they fit.
  awaitable<bool> write_all(asio::const_buffer first, asio::const_buffer second = {}) {
    const std::array<asio::const_buffer, 2> parts{first, second};
    writing = true;
    auto [ec, n] = co_await asio::async_write(stream, parts, as_tuple_awaitable);
    writing = false;
    to_peer = {};  // the peer took it all: a later stall is judged from scratch
    co_return !ec;
  }

  // Answers an unparseable request and ends the connection (its framing can't be trusted).
  awaitable<void> reject(int status, std::string_view why, std::string_view route_value, const route_info* route) {
    auto plan = error_response(status, why);
    auto head = format_head(plan, plan.body.size(), route_value, "", false);
    co_await write_all(asio::buffer(head), asio::buffer(plan.body));
    ctx.events().emit(
        http_request_event{.listener = listener->name, .peer = peer, .route = route, .status = status, .error = why},
        {.bytes_down = head.size() + plan.body.size()});
  }

  awaitable<void> run() {
    if constexpr (is_tls) {
      if (!co_await handshake()) co_return;
    }
    buf.resize(head_chunk);
    for (;;) {
      parse_result<http::request> parsed;
      if (!co_await read_head(parsed)) co_return;
      // Every byte on this connection was written after the session registered it, so by now the
      // entry is there if the connection is a relay.
      if (!route_found) route_found = ctx.routes.find(id);
      const auto& route = *route_found;
      const std::string route_value = format_route_header(route.get());
      if (parsed.invalid()) {
        // RFC 6585 §5: 431 covers one field too large and the fields together being too many.
        const bool too_large = parsed.reason == "header too large" || parsed.reason == "too many headers";
        co_return co_await reject(too_large ? 431 : 400, parsed.reason, route_value, route.get());
      }
      busy = true;
      const auto started_at = steady_clock::now();
      const http::request& req = parsed.value;
      consume(parsed.consumed);
      response_plan plan = route_request(req, route.get(), started_at);
      if (!co_await answer_expect(req, plan, route_value, route.get(), started_at)) co_return;
      const auto body_in = co_await read_body(req, plan, route.get(), started_at);
      if (!body_in) co_return;
      if (plan.delay.count() > 0) {
        deadline = steady_clock::now() + plan.delay + limits().idle_timeout;
        asio::steady_timer timer(stream.get_executor(), plan.delay);
        auto [ec] = co_await timer.async_wait(as_tuple_awaitable);
        if (ec) co_return;
      }
      if (!co_await respond(req, plan, route_value, route.get(), *body_in, started_at)) co_return;
      if (used == 0 && buf.size() > head_chunk) {  // a burst grew it: idle at the small size again
        buf.resize(head_chunk);
        buf.shrink_to_fit();
      }
    }
  }

  // Waits for a whole head: idle timeout before the first byte, header timeout after it. False:
  // the connection ended (or a drain found it idle).
  awaitable<bool> read_head(parse_result<http::request>& parsed) {
    deadline = head_deadline(steady_clock::now() + (used ? limits().header_timeout : limits().idle_timeout));
    bool started = used > 0;
    for (;;) {
      parsed = http::parse_request(std::string_view(buf.data(), used));
      if (!parsed.need_more()) {
        pending.leave();
        co_return true;
      }
      if (ctx.stopping && used == 0) co_return false;
      if (co_await read_more() == 0) co_return false;
      if (!started) {
        started = true;
        deadline = head_deadline(steady_clock::now() + limits().header_timeout);
      }
    }
  }

  // What the request gets: the pure plan, with the pages and probe tokens filled in, the probe's
  // samples observed, and the probe-result rate applied.
  response_plan route_request(const http::request& req, const route_info* route, steady_clock::time_point started_at) {
    response_plan plan = plan_response(req);
    if (plan.probe_page || plan.probe_token) {
      const auto t = ctx.probe_runs_seen->issue(probe_client(route, peer), started_at);
      plan.body =
          plan.probe_page ? probe_page(t.run, t.token) : "{\"run\":\"" + t.run + "\",\"token\":\"" + t.token + "\"}\n";
    }
    if (plan.index_page) plan_index_page(plan, ctx, listener->name, req, id.to_address);
    if (const auto sample = probe_sample_of(req)) {
      probe_runs::seen s;
      if (route) {
        const auto& p = route->phases;
        const auto from = p.upgrade_done >= 0 ? p.upgrade_done : p.tls_done;
        s.vless = true;
        s.session = route->session_id;
        if (from >= 0 && p.header_complete >= 0) s.vless_ms = static_cast<double>(p.header_complete - from) / 1000.0;
      }
      ctx.probe_runs_seen->observe(sample->run, sample->seq, s, started_at);
    }
    // Each probe result is a probe.run line of up to 256 KiB: past [limits]
    // probe_results_per_minute (all target listeners together) a post is refused, its body never
    // read, so a flood of posts cannot flood the log.
    if (plan.probe_result && !ctx.probe_posts->take(started_at, ctx.limits().probe_results_per_minute)) {
      plan = error_response(429, "probe results arrive faster than [limits] probe_results_per_minute");
      plan.note = "probe_rate_limited";
      plan.close = true;
    }
    return plan;
  }

  // A client that asks first (curl does for bodies over 1 KiB) would otherwise wait about a
  // second before sending: that second would land in an upload measurement. Only a response
  // that reads the body invites it: any other (404, 405, ...) is answered at once and the
  // connection closed, the body never read (RFC 9110 §10.1.1). False: the connection ends.
  awaitable<bool> answer_expect(const http::request& req, const response_plan& plan, const std::string& route_value,
                                const route_info* route, steady_clock::time_point started_at) {
    if (req.content_length > 0 && req.version_minor == 1 && used == 0) {
      if (auto expect = req.find("Expect"); expect && http::iequals(*expect, "100-continue")) {
        if (!plan.sink && !plan.probe_result) {
          const std::string head = format_head(plan, plan.content_length(), route_value, "", false);
          const bool ok = co_await write_all(asio::buffer(head), asio::buffer(plan.body));
          log_request(req, plan.status, route, ok ? plan.body.size() : 0, 0, started_at, ok);
          co_return false;
        }
        static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!co_await write_all(asio::buffer(go_on.data(), go_on.size()))) co_return false;
      }
    }
    co_return true;
  }

  // The request's body: counted into a sink, read as a probe result, or skipped to keep the
  // framing. Returns the body bytes read, or nothing when the connection ends.
  awaitable<std::optional<std::uint64_t>> read_body(const http::request& req, response_plan& plan,
                                                    const route_info* route, steady_clock::time_point started_at) {
    std::uint64_t body_in = 0;
    if (plan.sink) {
      // Read and discard the declared body; bytes already buffered count first.
      std::uint64_t left = req.content_length;
      std::uint64_t from_buf = std::min<std::uint64_t>(left, used);
      consume(from_buf);
      left -= from_buf;
      body_in += from_buf;
      // A buffer of its own, for this body only (64 KiB reads; uninitialised: never read back).
      const std::size_t sink_size = static_cast<std::size_t>(std::min<std::uint64_t>(left, read_chunk));
      const std::unique_ptr<char[]> sink(left > 0 ? new char[sink_size] : nullptr);
      auto rate = start_rate();
      while (left > 0) {
        arm_body_deadline();
        auto [ec, n] = co_await stream.async_read_some(
            asio::buffer(sink.get(), std::min<std::uint64_t>(sink_size, left)), as_tuple_awaitable);
        if (ec) {
          log_slow(req, route, body_in, started_at);
          co_return std::nullopt;
        }
        left -= n;
        body_in += n;
        count_rate(rate, n);
      }
      end_rate();
      plan.body = std::to_string(body_in) + "\n";
    } else if (plan.probe_result) {
      body_in = co_await read_probe_result(req, plan, route);
      if (!plan.probe_result) {
        log_slow(req, route, body_in, started_at);
        co_return std::nullopt;
      }
    } else if (req.content_length > 0 && !(plan.close && plan.status >= 400)) {
      // Endpoints that take no body still have to skip it to keep the framing (a refusal that
      // closes does not read it).
      std::uint64_t left = req.content_length;
      auto rate = start_rate();
      while (left > 0) {
        arm_body_deadline();
        if (used == 0 && co_await read_more() == 0) {
          log_slow(req, route, 0, started_at);
          co_return std::nullopt;
        }
        auto n = std::min<std::uint64_t>(left, used);
        consume(n);
        left -= n;
        count_rate(rate, n);
      }
      end_rate();
    }
    co_return body_in;
  }

  // Writes the response and its http.request line. True: the connection stays for the next request.
  awaitable<bool> respond(const http::request& req, const response_plan& plan, const std::string& route_value,
                          const route_info* route, std::uint64_t body_in, steady_clock::time_point started_at) {
    // Decided now, not when the head arrived: a drain that began during /delay must say close.
    const bool keep_alive = req.keep_alive && !ctx.stopping && !plan.close;
    const std::string timing =
        route ? format_server_timing(route->phases, route->quickack, route->ja4, route->generation) : std::string();
    const std::uint64_t length = plan.content_length();
    const std::string head =
        format_head(plan, length, route_value, timing, keep_alive, route ? std::string_view(route->listener) : "");
    arm_write_deadline();
    bool ok = true;
    std::uint64_t sent = 0;
    if (plan.head_only || plan.status == 204) {
      ok = co_await write_all(asio::buffer(head));
    } else if (plan.generated_bytes == 0) {
      ok = co_await write_all(asio::buffer(head), asio::buffer(plan.body));
      sent = plan.body.size();
    } else {
      const auto& block = pattern_block();
      std::uint64_t left = plan.generated_bytes;
      std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      ok = co_await write_all(asio::buffer(head), asio::buffer(block.data(), first));
      left -= first;
      sent += first;
      while (ok && left > 0) {
        arm_write_deadline();
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
        ok = co_await write_all(asio::buffer(block.data(), n));
        left -= n;
        sent += ok ? n : 0;
      }
    }
    log_request(req, plan.status, route, sent, body_in, started_at, ok,
                slow ? "slow_transfer" : "response not completed", plan.note);
    busy = false;
    co_return ok&& keep_alive;
  }

  // POST /probe/result: the body (plan_response capped its length) read whole, then judged by
  // handle_probe_result, which replaces the plan and may give a probe.run line. On a read error
  // the plan's probe_result flag is cleared. Returns the body bytes read.
  awaitable<std::uint64_t> read_probe_result(const http::request& req, response_plan& plan, const route_info* route) {
    std::string body;
    body.reserve(static_cast<std::size_t>(req.content_length));
    std::uint64_t left = req.content_length;
    auto rate = start_rate();
    while (left > 0) {
      arm_body_deadline();
      if (used == 0 && co_await read_more() == 0) {
        plan.probe_result = false;
        co_return body.size();
      }
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, used));
      body.append(buf.data(), n);
      consume(n);
      left -= n;
      count_rate(rate, n);
    }
    end_rate();
    const auto agent = req.find("User-Agent");
    const auto token = req.find("X-Vlessbench-Probe-Token");
    auto outcome =
        handle_probe_result(body, agent ? *agent : std::string_view(), listener->name, peer, route,
                            *ctx.probe_runs_seen, token ? *token : std::string_view(), probe_client(route, peer));
    if (outcome.plan.status == 403) {
      ctx.hub.probe_refused(outcome.plan.note);
      spdlog::info("probe result from {} refused: {}", peer, outcome.plan.note);
    }
    plan = std::move(outcome.plan);
    plan.probe_result = true;
    if (!outcome.log_line.empty()) ctx.log.write(outcome.log_line);
    if (outcome.record) ctx.hub.probe_run(std::move(*outcome.record));
    co_return body.size();
  }

  // A body cut by the rate rule gets a line of its own; any other read error ends silently.
  void log_slow(const http::request& req, const route_info* route, std::uint64_t received,
                steady_clock::time_point started_at) {
    if (slow) log_request(req, 408, route, 0, received, started_at, false, "slow_transfer");
  }

  void log_request(const http::request& req, int status, const route_info* route, std::uint64_t sent,
                   std::uint64_t received, steady_clock::time_point started_at, bool complete,
                   std::string_view error = "response not completed", std::string_view note = {}) {
    auto label = [&](const char* header) {
      const auto v = req.find(header);
      return v ? v->substr(0, max_label) : std::string_view();
    };
    ctx.events().emit(
        http_request_event{
            .listener = listener->name,
            .peer = peer,
            .route = route,
            .method = req.method,
            .path = req.target,
            .status = status,
            .bytes = sent,
            .bytes_in = received,
            .duration_us =
                std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - started_at).count(),
            .error = complete ? note : error,
            .run = label("X-Vlessbench-Run"),
            .seq = label("X-Vlessbench-Seq"),
            .path_label = label("X-Vlessbench-Path"),
            .ja4 = ja4},
        {.bytes_up = received, .bytes_down = sent});
  }
};

template <class Stream>
awaitable<void> serve(target_context& ctx, std::shared_ptr<listener_runtime> listener, Stream stream,
                      tcp::endpoint peer_ep, tcp::endpoint local_ep, pending_set::ticket pending) {
  connection<Stream> c{
      ctx, listener, std::move(stream), endpoint_text(peer_ep), flow_id::tcp(peer_ep, local_ep), {}, {}, 0,
      {},  false,    std::move(pending)};
  if (!c.pending.arm([&c] { c.close(); })) co_return;  // evicted before it started
  const connection_registration registered(ctx.connections, c.stream.get_executor(), [&c](bool force) {
    if (force || !c.busy) c.close();
  });
  c.deadline = c.head_deadline(steady_clock::now() + c.limits().idle_timeout);
  co_await (c.run() || watchdog(c.deadline, [&c] { return c.on_deadline(); }));
  c.close();
}

}  // namespace

awaitable<void> serve_connection(target_context& ctx, std::shared_ptr<listener_runtime> listener, tcp::socket socket,
                                 tcp::endpoint peer_ep, pending_set::ticket pending,
                                 std::shared_ptr<asio::ssl::context> tls) {
  std::error_code ec;
  auto local_ep = socket.local_endpoint(ec);  // getsockname() still works after a reset
  if (ec) co_return;
  if (auto err = apply_on_open(socket.native_handle(), listener->tcp.load()))
    spdlog::warn("target {}: setsockopt: {}", listener->name, err.message());
  policy_stream plain(std::move(socket), &listener->tcp);
  if (!tls) {
    co_await serve(ctx, std::move(listener), std::move(plain), peer_ep, local_ep, std::move(pending));
    co_return;
  }
  // tls (the daemon's context when accepted) stays alive with this frame: a reload may swap it.
  tls_target_stream secured(counted_stream(std::move(plain)), *tls);
  co_await serve(ctx, std::move(listener), std::move(secured), peer_ep, local_ep, std::move(pending));
}

}  // namespace vlessbench::target
