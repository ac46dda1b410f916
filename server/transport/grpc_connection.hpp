#pragma once
// One gRPC listener connection (transport = "grpc"): TLS with ALPN h2 (Lower =
// tls_stream) or h2c with prior knowledge (plain_stream), then HTTP/2
// (grpc_h2.hpp) carrying many streams, each one VLESS session. The session
// template (server/vless_session.hpp) owns a socket it closes, cancels and
// shuts down; a stream has none, so each accepted stream gets a socketpair: the
// session runs on one end (grpc_stream below), and a bridge here moves bytes
// between the other end and the stream. Closing either side ends the other: the
// session's close or shutdown ends the stream with trailers (grpc-status 0), a
// reset from the client closes the session's socket. The cost is one copy and
// two system calls per chunk each way, and two descriptors per stream; the gain
// is that a gRPC session is the same code, limits, phases and log line as every
// other.
//
// Bounds: the bridge writes a stream's decoded bytes to the socketpair before
// the stream's window opens again (grpc_h2.hpp: manual flow control), and reads
// the socketpair only while the stream's outbound buffer is below its limit;
// the kernel's socketpair buffers are the rest. Both directions wait on the
// socketpair without a buffer of their own: up() writes straight from the
// stream's decoded bytes, down() reads into the connection's one scratch buffer
// (a stalled stream holds its window's bytes and nothing besides).
#include <sys/socket.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/net/watchdog.hpp"
#include "server/transport/grpc_h2.hpp"
#include "server/transport/plain_stream.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench {

// The transport of a session that rides an HTTP/2 stream: the socketpair end,
// with the connection's TLS facts and transport=grpc in the log.
class grpc_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  grpc_stream(policy_stream pair, transport::facts f, std::shared_ptr<const grpc::h2_stream> stream)
      : lower_(std::move(pair)), facts_(std::move(f)), stream_(std::move(stream)) {}
  grpc_stream(const grpc_stream&) = delete;
  grpc_stream& operator=(const grpc_stream&) = delete;

  // Not a TCP connection: no socket options to apply (serve() skips them).
  static constexpr transport::abilities can{.bridged = true};
  executor_type get_executor() { return lower_.get_executor(); }
  tcp::socket& socket() { return lower_.socket(); }
  transport::facts facts() const { return facts_; }
  // open() cannot fail (the stream was accepted before the session began). A gun framing
  // violation on the stream (the bridge then closes the session's socket): the session's reject
  // reason instead of a truncated header.
  std::optional<std::string_view> failure() const {
    if (stream_->failure.empty()) return std::nullopt;
    return stream_->failure;
  }
  // What the client's flow control let through of what the session wrote (the [limits]
  // min_rate rule's count on a transport without TCP_INFO): a client that never opens its
  // window makes none.
  std::uint64_t bytes_delivered() const { return stream_->sent; }
  // The stream was opened (its request accepted) before the session started: over TLS, the
  // connection's handshake was done before the session's clock started (tls_done 0, not the
  // -1 of plain TCP).
  awaitable<std::error_code> open(const transport::open_clock& clock) {
    if (!facts_.tls_version.empty()) clock.phases.tls_done = std::int64_t{0};
    clock.stamp(&session_phases::upgrade_done);
    co_return std::error_code{};
  }
  template <class B, class Token>
  auto async_read_some(const B& b, Token&& token) {
    return lower_.async_read_some(b, std::forward<Token>(token));
  }
  template <class B, class Token>
  auto async_write_some(const B& b, Token&& token) {
    return lower_.async_write_some(b, std::forward<Token>(token));
  }
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return lower_.async_wait_readable(std::forward<Token>(token));
  }
  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) { return lower_.read_now(data, size, ec); }
  void release_read_ahead() { lower_.release_read_ahead(); }
  template <class Token>
  auto async_shutdown(Token&& token) {
    return lower_.async_shutdown(std::forward<Token>(token));
  }

 private:
  plain_stream lower_;
  transport::facts facts_;
  std::shared_ptr<const grpc::h2_stream> stream_;
};

namespace grpc {

// Wakes one waiting coroutine; a notify before the wait is not lost. One
// executor (no threads). One waiter only: a second wait's expires_at would
// cancel the first one's, and two waiters would wake each other forever.
class wakeup {
 public:
  explicit wakeup(const asio::any_io_executor& ex) : timer_(ex) {}
  void notify() {
    pending_ = true;
    timer_.cancel();
  }
  awaitable<void> wait() {
    if (!pending_) {
      timer_.expires_at(asio::steady_timer::time_point::max());
      auto [ec] = co_await timer_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
    pending_ = false;
  }

 private:
  asio::steady_timer timer_;
  bool pending_ = false;
};

// What the connection tells its owner (server/vless_server.cpp): a stream to
// serve as a VLESS session on the given socket, and a request or a connection
// refused with a reason.
struct connection_hooks {
  std::function<void(tcp::socket session_end, const transport::facts&, std::shared_ptr<const h2_stream>)> serve_stream;
  std::function<void(std::string_view reason, std::string_view detail)> reject;
  std::function<void()> first_stream;  // the connection proved itself: it leaves the pending set
};

struct connection_limits {
  h2_limits h2;
  std::chrono::milliseconds handshake_timeout{10000};  // TLS and the first request
  std::chrono::milliseconds idle_timeout{300000};      // no stream open
};

template <class Lower>
class connection : public std::enable_shared_from_this<connection<Lower>> {
 public:
  template <class... Args>
  connection(std::string service_name, connection_limits limits, connection_hooks hooks, Args&&... lower)
      : lower_(std::forward<Args>(lower)...),
        h2_(std::move(service_name), limits.h2),
        limits_(limits),
        hooks_(std::move(hooks)),
        wake_writer_(lower_.get_executor()) {}

  Lower& lower() { return lower_; }
  tcp::socket& socket() { return lower_.socket(); }
  const std::string& reason() const { return reason_; }

  // A drain: force closes at once; otherwise GOAWAY, streams in progress
  // finish.
  void drain(bool force) {
    if (force || h2_.open_streams() == 0) return close("drain");
    h2_.go_away();
    wake_writer_.notify();
  }

  awaitable<void> run() {
    deadline_ = steady_clock::now() + limits_.handshake_timeout;
    co_await (serve() || watchdog(deadline_, [this] { close(opened_any_ ? "idle_timeout" : "handshake_timeout"); }));
    close(reason_.empty() ? "client_closed" : reason_);
    for (auto& [id, b] : bridges_) b->end();
    // Refused before any stream, or cut by a violation: one vless.reject line
    // for the connection.
    if (!opened_any_ || !h2_.failure().empty()) hooks_.reject(reason_, h2_.failure());
  }

 private:
  struct bridge {
    std::shared_ptr<h2_stream> stream;
    tcp::socket pair;
    wakeup wake_up, wake_down;  // one per direction (a wakeup has one waiter)
    bool up_done = false, down_done = false;
    bridge(std::shared_ptr<h2_stream> s, tcp::socket p)
        : stream(std::move(s)), pair(std::move(p)), wake_up(pair.get_executor()), wake_down(pair.get_executor()) {}
    void notify() {
      wake_up.notify();
      wake_down.notify();
    }
    void end() {
      std::error_code ignored;
      pair.close(ignored);
      notify();
    }
  };

  void close(std::string_view why) {
    if (reason_.empty()) reason_ = why;
    std::error_code ignored;
    lower_.socket().close(ignored);
    wake_writer_.notify();
  }

  awaitable<void> serve() {
    if (auto ec = co_await lower_.open(transport::open_clock{phases_, steady_clock::now()})) {
      reason_ = lower_.failure().value_or(std::string_view{});
      co_return;
    }
    facts_ = lower_.facts();
    facts_.transport = to_string(transport_kind::grpc);
    co_await (reader() && writer());
  }

  awaitable<void> reader() {
    std::string buf(16 * 1024, '\0');
    for (;;) {
      auto [ec, n] = co_await lower_.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) {
        if (reason_.empty()) reason_ = h2_.open_streams() > 0 || opened_any_ ? "client_closed" : "no_h2_preface";
        break;
      }
      const bool ok = h2_.feed(buf.data(), n);
      for (auto& r : h2_.take_rejected()) hooks_.reject(r.reason, r.detail);
      for (auto& s : h2_.take_opened()) open_stream(std::move(s));
      for (auto& [id, b] : bridges_) {
        if (b->stream->closed && b->stream->reset_code != 0) b->end();  // the client reset it
        b->notify();
      }
      wake_writer_.notify();
      if (!ok || h2_.done()) {
        if (reason_.empty()) reason_ = h2_.failure().empty() ? "h2_done" : h2_.failure();
        break;
      }
      if (!h2_.failure().empty() && reason_.empty()) reason_ = h2_.failure();
    }
    reading_done_ = true;
    wake_writer_.notify();
  }

  awaitable<void> writer() {
    std::string batch;
    for (;;) {
      batch.clear();
      for (auto out = h2_.next_output(); !out.empty(); out = h2_.next_output()) {
        batch.append(out);
        if (batch.size() >= 64 * 1024) break;
      }
      if (!batch.empty()) {
        auto [ec, n] = co_await asio::async_write(lower_, asio::buffer(batch), as_tuple_awaitable);
        (void)n;
        if (ec) break;
        // Sent DATA made room in streams' buffers: their bridges may read on.
        for (auto& [id, b] : bridges_) b->wake_down.notify();
        continue;
      }
      if (reading_done_ || h2_.done() || !lower_.socket().is_open()) break;
      co_await wake_writer_.wait();
    }
    std::error_code ignored;
    lower_.socket().close(ignored);  // ends the reader too
  }

  void open_stream(std::shared_ptr<h2_stream> s) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      h2_.reset(*s);
      hooks_.reject("h2_stream_failed", "socketpair: " + std::error_code(errno, std::system_category()).message());
      return;
    }
    auto ex = lower_.get_executor();
    tcp::socket ours(ex), theirs(ex);
    std::error_code e1, e2;
    ours.assign(tcp::v4(), fds[0], e1);
    theirs.assign(tcp::v4(), fds[1], e2);
    ours.non_blocking(true, e1);  // the bridge's reads and writes never wait (up(), down())
    if (!opened_any_) hooks_.first_stream();
    opened_any_ = true;
    deadline_ = steady_clock::time_point::max();
    auto b = std::make_shared<bridge>(s, std::move(ours));
    bridges_[s->id] = b;
    hooks_.serve_stream(std::move(theirs), facts_, s);
    auto self = this->shared_from_this();
    auto done = [self, b](std::exception_ptr) { self->bridge_ended(*b); };
    asio::co_spawn(ex, self->up(b), done);
    asio::co_spawn(ex, self->down(b), done);
  }

  void bridge_ended(bridge& b) {
    if (!b.up_done || !b.down_done) return;
    bridges_.erase(b.stream->id);
    if (bridges_.empty() && reason_.empty()) deadline_ = steady_clock::now() + limits_.idle_timeout;
  }

  // Client -> session: decoded bytes to the socketpair, then the window opens
  // by as much. Written without waiting from s.in (no copy that would outlive a
  // feed() appending to it); a full socketpair is waited for with nothing held.
  awaitable<void> up(std::shared_ptr<bridge> b) {
    h2_stream& s = *b->stream;
    for (;;) {
      if (!s.in.empty() && b->pair.is_open()) {
        std::error_code ec;
        const std::size_t n =
            b->pair.write_some(asio::buffer(s.in.data(), std::min<std::size_t>(s.in.size(), 64 * 1024)), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
          auto [wec] = co_await b->pair.async_wait(tcp::socket::wait_write, as_tuple_awaitable);
          if (wec) break;
          continue;
        }
        if (ec) break;
        h2_.consume(s, n);
        wake_writer_.notify();  // WINDOW_UPDATE
        continue;
      }
      if (!b->pair.is_open()) break;
      if (!s.failure.empty()) {
        // A framing violation: the session sees its stream fail, the client
        // grpc-status 13.
        h2_.finish(s, 13, s.failure);
        wake_writer_.notify();
        b->end();
        break;
      }
      if (s.peer_ended || s.closed) {
        std::error_code ignored;
        b->pair.shutdown(tcp::socket::shutdown_send,
                         ignored);  // the session reads EOF
        break;
      }
      co_await b->wake_up.wait();
    }
    b->up_done = true;
  }

  // Session -> client: what the session writes becomes Hunk messages; its EOF,
  // the trailers.
  // Waits for the socketpair without a buffer, then reads into scratch_ and
  // hands the bytes to h2_.send() (a copy) before the next wait.
  awaitable<void> down(std::shared_ptr<bridge> b) {
    h2_stream& s = *b->stream;
    if (scratch_.empty()) scratch_.resize(16 * 1024);
    for (;;) {
      if (s.closed) {
        b->end();  // reset by the client, or the connection is gone
        break;
      }
      if (s.out.size() >= limits_.h2.out_limit) {
        co_await b->wake_down.wait();
        continue;
      }
      auto [ec] = co_await b->pair.async_wait(tcp::socket::wait_read, as_tuple_awaitable);
      std::size_t n = 0;
      if (!ec) n = b->pair.read_some(asio::buffer(scratch_), ec);  // non-blocking (open_stream())
      if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
      if (ec) {
        if (ec == asio::error::eof)
          h2_.finish(s, 0, "");
        else if (!s.closed && s.failure.empty())
          h2_.reset(s);
        wake_writer_.notify();
        break;
      }
      h2_.send(s, scratch_.data(), n);
      wake_writer_.notify();
    }
    b->down_done = true;
  }

  Lower lower_;
  h2_server h2_;
  connection_limits limits_;
  connection_hooks hooks_;
  wakeup wake_writer_;
  session_phases phases_;
  transport::facts facts_;
  watchdog_deadline deadline_;
  std::map<std::int32_t, std::shared_ptr<bridge>> bridges_;
  std::vector<char> scratch_;  // down()'s reads, one at a time (one executor, no wait in between)
  std::string reason_;
  bool opened_any_ = false;
  bool reading_done_ = false;
};

}  // namespace grpc
}  // namespace vlessbench
