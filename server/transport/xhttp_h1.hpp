#pragma once
// One XHTTP listener connection over HTTP/1.1 (transport = "xhttp"; TLS with ALPN http/1.1 when
// Lower = tls_stream, plain TCP with plain_stream). Requests are read one after another (a
// client may pipeline packet-up POSTs) and each is classified (core/wire/xhttp_request.hpp):
//   GET (download) and POST <path> (stream-one): the answer is 200 with a chunked body, flushed
//     at once and fed from the session's socketpair (xhttp_session.hpp) until the VLESS session
//     ends; the connection then closes;
//   POST <session> (stream-up): 200 at once, the body (chunked or not) is the uplink;
//   POST <session>/<seq> (packet-up): the body, at most max_post_bytes, joins the session's
//     order; answered 200 once the session has room for it.
// A request refused is answered with a status (404 path or host, 405 method, 400 padding, session
// or seq, 409 a second GET or streaming POST, 413 too large, 503 too many sessions), reported
// with its reason, and the connection closes.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/net/watchdog.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/xhttp_request.hpp"
#include "server/transport/xhttp_session.hpp"

namespace vlessbench::xhttp {

struct connection_hooks {
  // A session's requests are there: serve its VLESS stream on the socket (its socketpair end).
  std::function<void(tcp::socket, const transport::facts&, std::shared_ptr<session_state>)> serve;
  std::function<void(std::string_view reason, std::string_view detail)> reject;
  std::function<void()> first_request;  // the connection proved itself: it leaves the pending set
  // The connection ended: when none of its requests made a session (uplink POSTs of sessions
  // whose GET came on another connection), the id taken at accept ends with an xhttp.connection
  // line: its HTTP version ("1.1", "2") and, over HTTP/1.1, the uplink POSTs it carried.
  std::function<void(std::string_view http, std::optional<std::uint64_t> posts)> ended;
};

struct connection_limits {
  std::chrono::milliseconds handshake_timeout{10000};  // TLS and the first request's head
  std::chrono::milliseconds idle_timeout{300000};      // between requests, and a streaming body's
  std::chrono::milliseconds body_timeout{10000};       // a packet's body: each read
};

// The response headers every XHTTP answer carries: X-Padding within the listener's range.
std::string padding_header(const transport_spec& t);
// A downlink's (and stream-up's) head: 200, chunked, unbuffered, uncached, event-stream.
std::string stream_head(const transport_spec& t, bool event_stream);
std::string short_answer(const transport_spec& t, int status, bool keep_alive);
int status_for(std::string_view reason);
// The Host header (without a port) names the listener's host (case-insensitive).
bool host_matches(std::string_view header, std::string_view host);

template <class Lower>
class h1_connection : public std::enable_shared_from_this<h1_connection<Lower>> {
 public:
  template <class... Args>
  h1_connection(std::shared_ptr<hub> h, transport_spec t, connection_limits limits, connection_hooks hooks,
                tcp::endpoint client, Args&&... lower)
      : lower_(std::forward<Args>(lower)...),
        hub_(std::move(h)),
        t_(std::move(t)),
        path_(normalize_path(t_.path)),
        limits_(limits),
        hooks_(std::move(hooks)),
        client_(std::move(client)) {}

  Lower& lower() { return lower_; }
  // Uplink POSTs (packet-up and stream-up) this connection carried.
  std::uint64_t posts() const { return posts_; }
  tcp::socket& socket() { return lower_.socket(); }

  void drain(bool force) {
    draining_ = true;
    if (force || !busy_) close_lower();
  }

  awaitable<void> run() {
    deadline_ = steady_clock::now() + limits_.handshake_timeout;
    co_await (serve() || watchdog(deadline_, [this] { close_lower(); }));
    close_lower();
  }

 private:
  void close_lower() {
    std::error_code ignored;
    lower_.socket().close(ignored);
  }

  awaitable<void> serve() {
    session_phases phases;
    if (auto ec = co_await lower_.open(transport::open_clock{phases, steady_clock::now()})) {
      hooks_.reject(lower_.failure().value_or("tls_handshake_failed"), "");
      co_return;
    }
    facts_ = lower_.facts();
    facts_.transport = to_string(transport_kind::xhttp);
    facts_.reused = false;  // a session's GET (or stream-one POST) holds its connection to its end
    for (;;) {
      auto req = co_await read_head();
      if (!req) co_return;
      if (!proved_) {
        proved_ = true;
        hooks_.first_request();
      }
      busy_ = true;
      const bool keep = co_await handle(*req);
      busy_ = false;
      if (!keep || draining_ || !lower_.socket().is_open()) co_return;
      deadline_ = steady_clock::now() + limits_.idle_timeout;
    }
  }

  // One read, then what else is already here in the same turn, up to a POST and its head: a
  // pipelined POST's body is taken at once, not record by record between other sessions' turns
  // (a client that resets its connection discards what we had not read; packet_bound()).
  awaitable<bool> read_more() {
    constexpr std::size_t step = 16 * 1024;
    const std::size_t cap = std::size_t{t_.max_post_bytes} + 64 * 1024;
    std::size_t at = in_.size();
    in_.resize(at + step);
    auto [ec, n] = co_await lower_.async_read_some(asio::buffer(in_.data() + at, step), as_tuple_awaitable);
    in_.resize(at + n);
    if (ec) co_return false;
    for (std::error_code later; in_.size() < cap;) {
      at = in_.size();
      in_.resize(at + step);
      const std::size_t k = lower_.read_now(in_.data() + at, step, later);
      in_.resize(at + k);
      if (k == 0) break;  // an error shows on the next read
    }
    co_return true;
  }

  awaitable<bool> write(std::string_view bytes) {
    auto [ec, n] = co_await asio::async_write(lower_, asio::buffer(bytes.data(), bytes.size()), as_tuple_awaitable);
    (void)n;
    co_return !ec;
  }

  // A join's refusal as the request's: a session that ended is no longer there (404). A named
  // string, not a conditional's temporary inside co_await (GCC 12 destroys that one twice).
  static std::string_view refusal(const std::string& why) {
    return why == "xhttp_session_ended" ? std::string_view("wrong_path") : std::string_view(why);
  }

  // Answers with an error status, reports why, and ends the connection.
  awaitable<bool> refuse(std::string_view reason, std::string detail) {
    hooks_.reject(reason, detail);
    co_await write(short_answer(t_, status_for(reason), false));
    co_return false;
  }

  awaitable<std::optional<http::request>> read_head() {
    for (;;) {
      auto r = http::parse_request(in_, http::body_framing::chunked_too);
      if (r.complete()) {
        in_.erase(0, r.consumed);
        co_return std::move(r.value);
      }
      if (r.invalid()) {
        hooks_.reject("bad_request", r.reason);
        co_await write(short_answer(t_, r.reason == "header too large" ? 431 : 400, false));
        co_return std::nullopt;
      }
      if (!co_await read_more()) {
        if (!proved_) hooks_.reject(in_.empty() ? "client_closed" : "truncated_request", "");
        co_return std::nullopt;
      }
    }
  }

  awaitable<bool> handle(const http::request& req) {
    const std::string what = req.method + " " + req.target.substr(0, 120);
    if (!t_.host.empty() && !host_matches(req.find("Host").value_or(""), t_.host))
      co_return co_await refuse("wrong_host", std::string(req.find("Host").value_or("")));
    const rules r{path_, t_.xhttp_mode, t_.padding_min, t_.padding_max};
    auto c = classify(req.method, req.target, req.find("Referer"), r);
    if (c.invalid()) co_return co_await refuse(c.reason, what);
    switch (c.value.kind) {
      case request_kind::download: co_return co_await download(c.value.session);
      case request_kind::stream_one: co_return co_await stream_one(req);
      case request_kind::stream_up: ++posts_; co_return co_await stream_up(req, c.value.session);
      case request_kind::packet: ++posts_; co_return co_await packet(req, c.value.session, c.value.seq);
    }
    co_return false;
  }

  std::shared_ptr<session_state> join(const std::string& id, std::string& why) {
    auto s = hub_->join(lower_.get_executor(), id, t_, client_.address(), why);
    if (s && s->client.empty()) s->client = format_endpoint(client_);
    return s;
  }

  void start(const std::shared_ptr<session_state>& s) {
    s->started = true;
    hooks_.serve(std::move(s->theirs), facts_, s);
  }

  awaitable<bool> download(const std::string& id) {
    std::string why;
    auto s = join(id, why);
    if (!s) co_return co_await refuse(refusal(why), "GET session " + id);
    if (s->download || s->closed) co_return co_await refuse("xhttp_duplicate_download", "GET session " + id);
    hub_->connected(*s);
    s->download = true;
    s->note_get();
    s->changed.notify();
    if (!co_await write(stream_head(t_, true))) {
      hub_->leave(*s);
      s->close();
      co_return false;
    }
    start(s);
    deadline_ = steady_clock::time_point::max();
    co_await (pump(*s) && watch_client(*s));
    hub_->leave(*s);
    s->close();
    co_return false;
  }

  awaitable<bool> stream_one(const http::request& req) {
    auto s = std::make_shared<session_state>(lower_.get_executor(), "", t_, client_.address());
    std::string why;
    if (!open_pair(*s, why)) co_return co_await refuse("xhttp_session_failed", why);
    asio::co_spawn(lower_.get_executor(), uplink(s), asio::detached);
    s->download = true;
    s->note_post(false);
    if (!co_await write(stream_head(t_, true))) {
      s->close();
      co_return false;
    }
    start(s);
    deadline_ = steady_clock::time_point::max();
    co_await (pump(*s) && upload_stream(req, *s));
    s->close();
    co_return false;
  }

  awaitable<bool> stream_up(const http::request& req, const std::string& id) {
    std::string why;
    auto s = join(id, why);
    if (!s) co_return co_await refuse(refusal(why), "POST session " + id);
    if (s->stream_up || s->closed) co_return co_await refuse("xhttp_duplicate_upload", "POST session " + id);
    s->stream_up = true;
    s->note_post(false);
    s->close_upload = [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->close_lower();
    };
    if (!co_await write(stream_head(t_, false))) co_return false;
    // A streaming upload lasts as long as its session (which ends it through close_upload), not
    // the first request's handshake_timeout from the accept.
    deadline_ = steady_clock::time_point::max();
    const bool ok = co_await upload_stream(req, *s);
    if (!ok) co_return false;
    co_await write("0\r\n\r\n");
    co_return req.keep_alive;
  }

  awaitable<bool> packet(const http::request& req, const std::string& id, std::uint64_t seq) {
    const std::string what = "session " + id + " seq " + std::to_string(seq);
    if (!req.chunked && req.content_length > t_.max_post_bytes)
      co_return co_await refuse("xhttp_post_too_large", what + ": " + std::to_string(req.content_length) + " bytes");
    std::string body;
    if (!co_await read_packet(req, body)) co_return false;
    if (body.size() > t_.max_post_bytes) co_return co_await refuse("xhttp_post_too_large", what);
    std::string why;
    auto s = join(id, why);
    if (!s && why == "xhttp_session_ended") {  // the session's close overtook its last POSTs
      co_return co_await write(short_answer(t_, 200, req.keep_alive)) && req.keep_alive;
    }
    if (!s) co_return co_await refuse(why, what);
    if (s->stream_up) co_return co_await refuse("xhttp_mixed_upload", what);
    s->note_post(true);
    // Ahead of a gap with the held POSTs at their bound: wait for the gap to close.
    std::string_view verdict;
    while (!s->closed && (verdict = s->order.admit(seq, body.size())) == "wait") {
      deadline_ = steady_clock::now() + limits_.idle_timeout;
      co_await s->changed.wait();
    }
    if (s->closed) co_return co_await write(short_answer(t_, 200, req.keep_alive)) && req.keep_alive;
    if (!verdict.empty()) {
      const std::string detail = what + " next " + std::to_string(s->order.next_seq());
      if (verdict != "xhttp_seq_replay") {
        hub_->leave(*s);
        s->fail(verdict);
      }
      co_return co_await refuse(verdict, detail);
    }
    (void)s->order.accept(seq, std::move(body));
    s->up += s->order.take();
    s->changed.notify();
    deadline_ = steady_clock::time_point::max();
    while (s->pending_up() > s->packet_room && !s->closed) co_await s->changed.wait();
    co_return co_await write(short_answer(t_, 200, req.keep_alive)) && req.keep_alive;
  }

  // A packet's body, whole (Content-Length or chunked), at most max_post_bytes + 1 bytes.
  awaitable<bool> read_packet(const http::request& req, std::string& body) {
    const std::size_t cap = std::size_t{t_.max_post_bytes} + 1;
    chunked_decoder chunks;
    std::uint64_t left = req.chunked ? 0 : req.content_length;
    for (;;) {
      if (req.chunked) {
        auto r = chunks.feed(in_, body, cap - body.size());
        in_.erase(0, r.consumed);
        if (r.invalid()) co_return co_await refuse("bad_request", std::string(r.reason));
        if (r.complete() || body.size() >= cap) co_return true;
      } else {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, in_.size()));
        body.append(in_, 0, n);
        in_.erase(0, n);
        left -= n;
        if (left == 0) co_return true;
      }
      deadline_ = steady_clock::now() + limits_.body_timeout;
      if (!co_await read_more()) co_return false;
    }
  }

  // A streaming body (stream-up, stream-one) into the session's uplink, as the session takes it.
  awaitable<bool> upload_stream(const http::request& req, session_state& s) {
    chunked_decoder chunks;
    std::uint64_t left = req.chunked ? 0 : req.content_length;
    bool ended = !req.chunked && left == 0;
    while (!ended) {
      if (req.chunked) {
        const std::size_t room = s.up.size() < up_limit ? up_limit - s.up.size() : 0;
        auto r = chunks.feed(in_, s.up, room);
        in_.erase(0, r.consumed);
        if (r.invalid()) {
          s.fail("bad_request");
          hooks_.reject("bad_request", std::string(r.reason));
          co_return false;
        }
        ended = r.complete();
      } else {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, in_.size()));
        s.up.append(in_, 0, n);
        in_.erase(0, n);
        left -= n;
        ended = left == 0;
      }
      s.changed.notify();
      if (ended) break;
      while (s.pending_up() >= up_limit && !s.closed) co_await s.changed.wait();
      if (s.closed) co_return false;
      // Bytes left in in_ waited for room (the decoder takes all it can otherwise).
      if (!in_.empty()) continue;
      if (!co_await read_more()) {
        if (!s.closed) s.close();
        co_return false;
      }
    }
    s.up_ended = true;
    s.changed.notify();
    co_return true;
  }

  // The session's downlink as the response body's chunks; the last chunk when the VLESS session
  // ends, then the connection closes.
  awaitable<void> pump(session_state& s) {
    std::string buf(16 * 1024, '\0');
    std::string out;
    bool client_gone = false;
    for (;;) {
      auto [ec, n] = co_await s.ours.async_read_some(asio::buffer(buf), as_tuple_awaitable);
      if (ec) break;
      char size[20];
      const int len = std::snprintf(size, sizeof size, "%zx\r\n", n);
      out.assign(size, static_cast<std::size_t>(len));
      out.append(buf.data(), n);
      out += "\r\n";
      if (!co_await write(out)) {
        client_gone = true;
        break;
      }
      s.delivered += n;
    }
    pumped_ = true;
    if (!client_gone) co_await write("0\r\n\r\n");
    s.close();
    close_lower();
  }

  // The client sends nothing while its GET is open: a read ends when it closes.
  awaitable<void> watch_client(session_state& s) {
    char b[256];
    auto [ec, n] = co_await lower_.async_read_some(asio::buffer(b), as_tuple_awaitable);
    (void)ec;
    (void)n;
    if (!pumped_) s.close();
  }

  Lower lower_;
  std::shared_ptr<hub> hub_;
  transport_spec t_;
  std::string path_;
  connection_limits limits_;
  connection_hooks hooks_;
  tcp::endpoint client_;
  transport::facts facts_;
  watchdog_deadline deadline_;
  std::string in_;
  bool proved_ = false;
  bool busy_ = false;
  bool draining_ = false;
  bool pumped_ = false;
  std::uint64_t posts_ = 0;
};

}  // namespace vlessbench::xhttp
