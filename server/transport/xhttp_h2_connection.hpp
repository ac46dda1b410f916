#pragma once
// One XHTTP listener connection over HTTP/2 (TLS with ALPN h2, Lower = opened_stream<tls_stream>;
// h2c with prior knowledge, Lower = plain_stream): the I/O around xhttp_h2.hpp. Every request
// stream gets a handler of its own, which joins the listener's hub (xhttp_session.hpp) as the
// HTTP/1.1 path's requests do: a download GET or a stream-one POST starts its session's VLESS
// stream on the socketpair and streams the session's downlink as its response body; a stream-up
// POST's body and a packet-up POST's body feed the session's uplink. Many sessions on one
// connection (Xray's XMUX) each get their own VLESS session, id and log line; a session started
// after another one on the same connection records reused = true.
//
// Bounds: a stream's window opens only as its body is taken (a session holds at most its stream
// window here and up_limit in its uplink); a response body's `out` holds at most out_limit before
// the handler stops reading the session's socketpair; the connection's reads stop with the
// connection. Refused requests are answered on their stream alone; the connection goes on.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/net/watchdog.hpp"
#include "core/wire/net_address.hpp"
#include "server/transport/grpc_connection.hpp"
#include "server/transport/xhttp_h1.hpp"
#include "server/transport/xhttp_h2.hpp"

namespace vlessbench::xhttp {

template <class Lower>
class h2_connection : public std::enable_shared_from_this<h2_connection<Lower>> {
 public:
  template <class... Args>
  h2_connection(std::shared_ptr<hub> h, transport_spec t, connection_limits limits, connection_hooks hooks,
                tcp::endpoint client, Args&&... lower)
      : lower_(std::forward<Args>(lower)...),
        hub_(std::move(h)),
        t_(std::move(t)),
        h2_(t_, h2_limits_for(t_)),
        out_limit_(h2_limits_for(t_).out_limit),
        limits_(limits),
        hooks_(std::move(hooks)),
        client_(std::move(client)),
        wake_writer_(lower_.get_executor()),
        changed_(lower_.get_executor()) {}

  Lower& lower() { return lower_; }
  tcp::socket& socket() { return lower_.socket(); }

  void drain(bool force) {
    if (force || h2_.open_streams() == 0) return close_lower("drain");
    h2_.go_away();
    wake_writer_.notify();
  }

  awaitable<void> run() {
    deadline_ = steady_clock::now() + limits_.handshake_timeout;
    co_await (serve() || watchdog(deadline_, [this] { close_lower(proved_ ? "idle_timeout" : "handshake_timeout"); }));
    close_lower(reason_.empty() ? "client_closed" : reason_);
    over_ = true;
    for (auto& [id, t] : tracked_) {
      if (ends_session(t)) t.session->close();
    }
    tracked_.clear();
    changed_.notify();
    // A connection that never made a request, or one cut by a violation: one vless.reject.
    if (!proved_ || !h2_.failure().empty()) hooks_.reject(h2_.failure().empty() ? reason_ : h2_.failure(), reason_);
  }

 private:
  // A stream whose end ends its session (the downlink's, a streaming upload's before its end).
  struct tracked {
    std::shared_ptr<h2_request> request;
    std::shared_ptr<session_state> session;
    bool upload_only = false;
  };

  // Whether the end of t's stream, or of the connection, ends its session: a download's or a
  // stream-one's does; a streaming upload's only before its body ended, for the session goes on
  // with its downlink (often on another connection: a client that got its upload's answer closes
  // this one) and its uplink's last bytes may not be in the socketpair yet.
  static bool ends_session(const tracked& t) { return !t.upload_only || !t.session->up_ended; }

  void close_lower(std::string_view why) {
    if (reason_.empty()) reason_ = why;
    std::error_code ignored;
    lower_.socket().close(ignored);
    wake_writer_.notify();
  }

  awaitable<void> serve() {
    facts_ = lower_.facts();
    facts_.transport = to_string(transport_kind::xhttp);
    co_await (reader() && writer());
  }

  awaitable<void> reader() {
    std::string buf(16 * 1024, '\0');
    for (;;) {
      auto [ec, n] = co_await lower_.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) {
        if (reason_.empty()) reason_ = proved_ ? "client_closed" : "no_h2_preface";
        break;
      }
      const bool ok = h2_.feed(buf.data(), n);
      after_feed();
      if (!ok || h2_.done()) {
        if (reason_.empty()) reason_ = h2_.failure().empty() ? "h2_done" : h2_.failure();
        break;
      }
    }
    reading_done_ = true;
    wake_writer_.notify();
  }

  void after_feed() {
    for (auto& r : h2_.take_rejected()) hooks_.reject(r.reason, r.detail);
    for (auto& r : h2_.take_opened()) {
      if (!proved_) {
        proved_ = true;
        hooks_.first_request();
      }
      asio::co_spawn(lower_.get_executor(), handle(this->shared_from_this(), r), [](std::exception_ptr e) {
        if (e) spdlog::error("xhttp h2 request: unexpected exception");
      });
    }
    for (auto it = tracked_.begin(); it != tracked_.end();) {
      const tracked& t = it->second;
      if (!t.request->closed) {
        ++it;
        continue;
      }
      if (ends_session(t)) t.session->close();
      it = tracked_.erase(it);
    }
    update_deadline();
    changed_.notify();
    wake_writer_.notify();
  }

  void update_deadline() {
    if (!proved_ || !reason_.empty()) return;
    deadline_ = h2_.open_streams() > 0 ? steady_clock::time_point::max() : steady_clock::now() + limits_.idle_timeout;
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
        changed_.notify();  // sent DATA made room in response bodies
        continue;
      }
      if (reading_done_ || h2_.done() || !lower_.socket().is_open()) break;
      co_await wake_writer_.wait();
    }
    std::error_code ignored;
    lower_.socket().close(ignored);  // ends the reader too
  }

  // Waits for the connection's or the session's next change.
  awaitable<void> wait(session_state* s) {
    if (s == nullptr) co_return co_await changed_.wait();
    co_await (changed_.wait() || s->changed.wait());
  }

  // keep: the connection lives as long as its handlers.
  awaitable<void> handle(std::shared_ptr<h2_connection> keep, std::shared_ptr<h2_request> r) {
    (void)keep;
    if (r->closed || over_) co_return;  // reset before its handler ran (a rapid reset's stream)
    switch (r->target.kind) {
      case request_kind::download: co_await download(r); break;
      case request_kind::stream_one: co_await stream_one(r); break;
      case request_kind::stream_up: co_await stream_up(r); break;
      case request_kind::packet: co_await packet(r); break;
    }
    update_deadline();
    wake_writer_.notify();
  }

  void refuse(h2_request& r, std::string_view reason, std::string detail) {
    hooks_.reject(reason, detail);
    h2_.answer(r, status_for(reason));
    wake_writer_.notify();
  }

  std::shared_ptr<session_state> join(const std::string& id, std::string& why) {
    auto s = hub_->join(lower_.get_executor(), id, t_, client_.address(), why);
    if (s && s->client.empty()) s->client = format_endpoint(client_);
    return s;
  }

  void start(const std::shared_ptr<session_state>& s) {
    s->started = true;
    transport::facts f = facts_;
    f.reused = sessions_started_++ > 0;
    hooks_.serve(std::move(s->theirs), f, s);
  }

  void track(const std::shared_ptr<h2_request>& r, const std::shared_ptr<session_state>& s, bool upload_only) {
    tracked_[r->id] = tracked{r, s, upload_only};
  }

  awaitable<void> download(std::shared_ptr<h2_request> r) {
    const std::string& id = r->target.session;
    std::string why;
    auto s = join(id, why);
    if (!s) co_return refuse(*r, why == "xhttp_session_ended" ? "wrong_path" : why, "GET session " + id);
    if (s->download || s->closed) co_return refuse(*r, "xhttp_duplicate_download", "GET session " + id);
    hub_->connected(*s);
    s->download = true;
    s->note_get();
    s->changed.notify();
    h2_.answer_stream(*r, true);
    wake_writer_.notify();
    track(r, s, false);
    start(s);
    co_await pump(*r, *s);
    hub_->leave(*s);
    s->close();
  }

  awaitable<void> stream_one(std::shared_ptr<h2_request> r) {
    auto s = std::make_shared<session_state>(lower_.get_executor(), "", t_, client_.address());
    s->client = format_endpoint(client_);
    std::string why;
    if (!open_pair(*s, why)) co_return refuse(*r, "xhttp_session_failed", why);
    asio::co_spawn(lower_.get_executor(), uplink(s), asio::detached);
    s->download = true;
    s->note_post(false);
    h2_.answer_stream(*r, true);
    wake_writer_.notify();
    track(r, s, false);
    start(s);
    co_await (pump(*r, *s) && feed_up(*r, *s));
    s->close();
  }

  awaitable<void> stream_up(std::shared_ptr<h2_request> r) {
    const std::string& id = r->target.session;
    std::string why;
    auto s = join(id, why);
    if (!s) co_return refuse(*r, why == "xhttp_session_ended" ? "wrong_path" : why, "POST session " + id);
    if (s->stream_up || s->closed) co_return refuse(*r, "xhttp_duplicate_upload", "POST session " + id);
    s->stream_up = true;
    s->note_post(false);
    s->close_upload = [weak = this->weak_from_this(), r] {
      if (auto self = weak.lock()) {
        self->h2_.reset(*r);
        self->wake_writer_.notify();
      }
    };
    h2_.answer_stream(*r, false);
    wake_writer_.notify();
    track(r, s, true);
    co_await feed_up(*r, *s);
    if (s->up_ended) h2_.finish(*r);
    wake_writer_.notify();
  }

  awaitable<void> packet(std::shared_ptr<h2_request> r) {
    const std::string what = "session " + r->target.session + " seq " + std::to_string(r->target.seq);
    while (!r->peer_ended && !r->closed && !r->too_large && !over_) co_await changed_.wait();
    if (r->too_large) co_return refuse(*r, "xhttp_post_too_large", what);
    if (r->closed || over_) co_return;
    std::string body = std::move(r->in);
    const std::size_t size = body.size();
    std::string why;
    auto s = join(r->target.session, why);
    if (!s && why == "xhttp_session_ended") {  // the session's close overtook its last POSTs
      h2_.consume(*r, size);
      h2_.answer(*r, 200);
      co_return;
    }
    if (!s) co_return refuse(*r, why, what);
    if (s->stream_up) co_return refuse(*r, "xhttp_mixed_upload", what);
    s->note_post(true);
    std::string_view verdict;
    while (!s->closed && !over_ && (verdict = s->order.admit(r->target.seq, size)) == "wait") co_await wait(s.get());
    if (s->closed || over_) {
      h2_.consume(*r, size);
      h2_.answer(*r, 200);
      co_return;
    }
    if (!verdict.empty()) {
      const std::string detail = what + " next " + std::to_string(s->order.next_seq());
      if (verdict != "xhttp_seq_replay") {
        hub_->leave(*s);
        s->fail(verdict);
      }
      co_return refuse(*r, verdict, detail);
    }
    (void)s->order.accept(r->target.seq, std::move(body));
    s->up += s->order.take();
    s->changed.notify();
    h2_.consume(*r, size);
    wake_writer_.notify();
    while (s->pending_up() > up_limit && !s->closed && !over_) co_await wait(s.get());
    h2_.answer(*r, 200);
  }

  // A streaming request body (stream-up, stream-one) into the session's uplink, as it takes it.
  awaitable<void> feed_up(h2_request& r, session_state& s) {
    for (;;) {
      if (over_) s.close();
      if (s.closed) co_return;
      const std::size_t pending = s.pending_up();
      if (!r.in.empty() && pending < up_limit) {
        const std::size_t n = std::min(r.in.size(), up_limit - pending);
        s.up.append(r.in, 0, n);
        h2_.consume(r, n);
        s.changed.notify();
        wake_writer_.notify();  // WINDOW_UPDATE
        continue;
      }
      if (r.in.empty() && r.peer_ended) {
        s.up_ended = true;
        s.changed.notify();
        co_return;
      }
      if (r.closed) {
        s.close();
        co_return;
      }
      co_await wait(&s);
    }
  }

  // The session's downlink as the response body; END_STREAM when the VLESS session ends.
  awaitable<void> pump(h2_request& r, session_state& s) {
    std::string buf(16 * 1024, '\0');
    for (;;) {
      s.delivered = r.sent;
      if (over_ || r.closed) break;
      if (r.out.size() >= out_limit_) {
        co_await changed_.wait();
        continue;
      }
      auto [ec, n] = co_await s.ours.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) break;
      h2_.send(r, buf.data(), n);
      wake_writer_.notify();
    }
    h2_.finish(r);
    wake_writer_.notify();
    s.close();
  }

  Lower lower_;
  std::shared_ptr<hub> hub_;
  transport_spec t_;
  h2_server h2_;
  std::size_t out_limit_;
  connection_limits limits_;
  connection_hooks hooks_;
  tcp::endpoint client_;
  grpc::wakeup wake_writer_;
  signal changed_;
  transport::facts facts_;
  watchdog_deadline deadline_;
  std::map<std::int32_t, tracked> tracked_;
  std::string reason_;
  std::uint64_t sessions_started_ = 0;
  bool proved_ = false;
  bool reading_done_ = false;
  bool over_ = false;
};

}  // namespace vlessbench::xhttp
