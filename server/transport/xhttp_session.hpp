#pragma once
// XHTTP's sessions (transport = "xhttp", core/wire/xhttp_request.hpp): a session is named by the
// client and joined by requests that may arrive on different connections (a GET for the
// downlink, POSTs for the uplink), so sessions live in the listener's hub, not in a connection.
// As a gRPC stream does (grpc_connection.hpp), each session runs the ordinary VLESS session on
// one end of a socketpair (xhttp_stream below); the requests move bytes through the other end:
// the uplink writer (uplink()) writes the ordered uplink into it, the downlink's response body is
// read from it (xhttp_h1.hpp).
//
// Bounds: a session holds at most up_limit ordered bytes not yet taken by its VLESS session from
// a streaming body (read as there is room), packet_bound() from packet-up POSTs (a POST past it
// waits to be answered), max_buffered_posts POSTs ahead of a gap (uplink_order), and, until its
// downlink GET comes, session_timeout_ms; the hub holds at most max_half_open sessions without a
// GET, max_half_open_per_source of them for one address. A hub serves one thread: the daemon
// accepts every connection of an XHTTP listener into one context.
#include <sys/socket.h>

#include <chrono>
#include <deque>
#include <set>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/net/asio_compat.hpp"
#include "core/wire/transport_spec.hpp"
#include "core/wire/xhttp_request.hpp"
#include "server/transport/plain_stream.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench::xhttp {

// Wakes every waiter; each re-checks its condition (one executor, no threads). The timer never
// expires: notify() cancels the waits under way.
class signal {
 public:
  explicit signal(const asio::any_io_executor& ex) : timer_(ex, asio::steady_timer::time_point::max()) {}
  void notify() { timer_.cancel(); }
  awaitable<void> wait() {
    auto [ec] = co_await timer_.async_wait(as_tuple_awaitable);
    (void)ec;
  }

 private:
  asio::steady_timer timer_;
};

inline constexpr std::size_t up_limit = 1u << 20;  // ordered uplink bytes a session holds

// Packet-up's bound, for the POSTs held ahead of a gap and for the ordered bytes a POST's answer
// may leave behind: room for several POSTs. A POST over it waits to be answered, and its
// connection is not read meanwhile; Xray's HTTP/1.1 client pipelines its POSTs without reading
// the answers and drops pooled connections (a reset that discards the requests we had not read
// yet), so reading must not stop while the session keeps up.
inline std::size_t packet_bound(const transport_spec& t) {
  return std::max<std::size_t>(4u << 20, 2 * std::size_t{t.max_post_bytes});
}

struct session_state {
  session_state(const asio::any_io_executor& ex, std::string session_id, const transport_spec& t,
                asio::ip::address from)
      : id(std::move(session_id)),
        source(from),
        ours(ex),
        theirs(ex),
        changed(ex),
        order(t.max_buffered_posts, packet_bound(t)),
        packet_room(packet_bound(t)),
        created(std::chrono::steady_clock::now()) {}

  std::string id;  // empty: stream-one (in no hub)
  asio::ip::address source;
  std::string client;       // the address of the request that made it, for the log
  tcp::socket ours;         // the bridge's end of the socketpair
  tcp::socket theirs;       // the VLESS session's end, until it starts
  signal changed;           // up drained, the session closed, a request joined
  uplink_order order;       // packet-up
  std::size_t packet_room;  // packet-up: ordered bytes a POST's answer may leave pending
  std::string up;           // ordered uplink bytes for the socketpair
  std::size_t writing = 0;  // bytes of up the writer is writing
  bool up_ended = false;    // the stream-up or stream-one body ended
  bool stream_up = false;   // a streaming POST joined (packet POSTs are then refused)
  bool download = false;    // the GET joined
  bool started = false;     // the VLESS session runs
  bool closed = false;
  std::string failure;                            // what cut the session (first cause wins)
  std::uint64_t delivered = 0;                    // downlink bytes written to the client
  std::chrono::steady_clock::time_point created;  // the session's first request: its clock's start

  // When its requests arrived (session_phases::xhttp), kept here until the VLESS session runs
  // and written into its phases as they come while it does (phases: set by xhttp_stream for its
  // life; all on the hub's one executor).
  std::int64_t get_us = -1, first_post_us = -1;
  bool packets = false;  // packet-up POSTs came
  post_gaps gaps;
  session_phases* phases = nullptr;
  void note_get() {
    get_us = since_created_us();
    publish();
  }
  // An uplink POST joined: a packet-up POST once its body is whole, a streaming one at its head.
  void note_post(bool packet) {
    const std::int64_t now = since_created_us();
    if (first_post_us < 0) first_post_us = now;
    if (packet) {
      packets = true;
      gaps.arrived(now);
    }
    publish();
  }
  void publish() const {
    if (phases == nullptr) return;
    xhttp_phases& x = phases->xhttp;
    x.get = get_us;
    x.first_post = first_post_us;
    x.post_gaps = packets ? static_cast<std::int64_t>(gaps.count()) : -1;
    x.post_gap_median = gaps.median_us().value_or(-1);
    x.post_gap_max = gaps.max_us().value_or(-1);
  }
  std::int64_t since_created_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - created).count();
  }

  std::size_t pending_up() const { return up.size() + writing; }
  void fail(std::string_view why) {
    if (failure.empty()) failure = why;
    close();
  }
  void close() {
    closed = true;
    std::error_code ignored;
    ours.close(ignored);
    changed.notify();
    if (auto f = std::exchange(close_upload, {})) f();
  }
  // Ends the streaming POST's connection (its read waits on the client).
  std::function<void()> close_upload;
};

// The socketpair, the VLESS session's end kept in theirs; false when the system refused one.
bool open_pair(session_state& s, std::string& why);

// Writes a session's ordered uplink into the socketpair; at the uplink's end, the VLESS session
// reads EOF.
awaitable<void> uplink(std::shared_ptr<session_state> s);

// The listener's sessions by id (one executor). Its connections hold it, and so does each
// session's reaper while it waits: it goes with the last of them (and with the io_context).
class hub : public std::enable_shared_from_this<hub> {
 public:
  static constexpr std::size_t max_half_open = 1024;
  static constexpr std::size_t max_half_open_per_source = 128;
  // What the hub reports of a session it drops: no GET came, the reason and a detail.
  std::function<void(const session_state&, std::string_view reason, std::string_view detail)> reject;

  // The session named id, created (and its reaper armed) when new; nullptr with why set when the
  // bounds refuse a new one.
  std::shared_ptr<session_state> join(const asio::any_io_executor& ex, const std::string& id, const transport_spec& t,
                                      const asio::ip::address& source, std::string& why);
  // The session leaves the hub (its GET ended, or it was dropped).
  void leave(const session_state& s);
  // The session's GET came: it counts as half-open no longer.
  void connected(const session_state& s);
  std::size_t size() const { return sessions_.size(); }
  // A session that ended lately (a POST after it is the close's race, not an attack).
  bool ended_lately(std::string_view id) const { return ended_.count(id) != 0; }

 private:
  static awaitable<void> reap(std::shared_ptr<hub> self, std::weak_ptr<session_state> weak,
                              std::chrono::milliseconds after);
  std::map<std::string, std::shared_ptr<session_state>, std::less<>> sessions_;
  std::map<asio::ip::address, std::size_t> half_open_by_source_;
  std::size_t half_open_ = 0;
  std::set<std::string, std::less<>> ended_;
  std::deque<std::string> ended_order_;  // the oldest leaves ended_ first
  static constexpr std::size_t max_ended = 1024;
};

}  // namespace vlessbench::xhttp

namespace vlessbench {

// The transport of a session that rides XHTTP requests: the socketpair end, with the
// connection's TLS facts and transport=xhttp in the log.
class xhttp_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  xhttp_stream(policy_stream pair, transport::facts f, std::shared_ptr<xhttp::session_state> s)
      : lower_(std::move(pair)), facts_(std::move(f)), state_(std::move(s)) {}
  // The session's phases go with it: requests after its end write them no longer.
  ~xhttp_stream() { state_->phases = nullptr; }
  xhttp_stream(const xhttp_stream&) = delete;
  xhttp_stream& operator=(const xhttp_stream&) = delete;

  static constexpr transport::abilities can{.bridged = true};
  executor_type get_executor() { return lower_.get_executor(); }
  tcp::socket& socket() { return lower_.socket(); }
  transport::facts facts() const { return facts_; }
  std::optional<std::string_view> failure() const {
    if (state_->failure.empty()) return std::nullopt;
    return state_->failure;
  }
  // What the downlink's response carried to the client (the [limits] min_rate rule's count).
  std::uint64_t bytes_delivered() const { return state_->delivered; }
  // The session starts once its requests came: over TLS, the handshake was before (tls_done 0);
  // its clock started at its first request (session_start::began), so upgrade_done is the wait
  // for the rest of them. From here on its requests' arrivals go into its phases.
  awaitable<std::error_code> open(const transport::open_clock& clock) {
    if (!facts_.tls_version.empty()) clock.phases.tls_done = std::int64_t{0};
    clock.stamp(&session_phases::upgrade_done);
    clock.phases.xhttp.reused = std::int64_t{facts_.reused.value_or(false) ? 1 : 0};
    state_->phases = &clock.phases;
    state_->publish();
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
  std::shared_ptr<xhttp::session_state> state_;
};

}  // namespace vlessbench
