#pragma once
// The one sub-connection engine of a multiplexed session (docs/sessions.md "Mux", "sing-mux"). A framing turns
// the client's bytes into events: open(id, destination: tcp or udp), data(id, bytes), end(id) (Mux.Cool in
// server/mux_session.hpp, XUDP its detail; sing-mux's smux, yamux and h2mux in server/sing_mux_session.hpp);
// the engine serves them and hands its own back to the framing (sub_framing: data, end, a refused open) to
// encode in its format. Each sub-connection dials its destination through the one dialer
// (server/upstream_dialer.hpp: the same [destinations] policy and route registration as a whole session's
// upstream), under a route_info of its own that names the session and the sub (route_info::sub), and is logged
// as a vless.sub line at its close. No template: the engine reaches its session through session_core's
// operations and its client through client_stream.
//
// Independence of sub-connections. Mux.Cool has no window of its own: the underlying stream is its only flow
// control, so a server must stop reading it when a destination takes data slower than the client sends (else
// its queue grows without bound), and a server that stopped reading for as long as one destination is stalled
// would stall every other sub-connection. The bounded window here: each TCP sub-connection queues at most
// mux_sub_queue_limit bytes its destination has not taken; past it the framing gives no more events (paused():
// the client's stream is not read, or its events wait) until that queue drains to half, but for at most
// mux_stall_limit: a destination that has not drained by then is stalled, and its sub-connection alone ends
// with an error (vless.sub error "sub_stalled"), after which events go on. So a slow destination is paced, a
// stalled one costs the others at most mux_stall_limit once, and memory stays bounded (max_mux_subs x the
// queue). UDP: mux_udp_queue_limit bytes; past it datagrams are dropped (counted: packets_dropped), as a full
// socket buffer would, without pausing anyone. Towards the client every sub-connection shares the one stream:
// frames wait in one queue of at most mux_down_limit bytes (and a framing may hold more for the client's
// windows: holding()); a sub-connection with data waits for room, so a client that reads slowly slows all of
// them (it is the one reader of them all) and the min_rate rule applies.
//
// One engine per multiplexed session, owned by its relay; coroutines per sub-connection (dial + relay towards
// the destination, relay back) and one writer towards the client, on the session's executor; join() awaits
// them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/wire/destination.hpp"
#include "server/mux_sub.hpp"
#include "server/relay_common.hpp"
#include "server/session_core.hpp"

namespace vlessbench::vless_server::detail {

using io_result = std::pair<std::error_code, std::size_t>;

// The client's byte stream (its transport, whatever it is): one reader (the framing's) and one writer (the
// engine's) at a time.
class client_stream {
 public:
  virtual ~client_stream() = default;
  virtual awaitable<io_result> read_some(asio::mutable_buffer into) = 0;
  virtual awaitable<io_result> write_all(asio::const_buffer from) = 0;
  virtual void cancel() = 0;  // a pending read or write ends (operation_aborted)
};

// What a framing encodes of the engine's events, appended to out (the bytes for the client).
class sub_framing {
 public:
  virtual ~sub_framing() = default;
  // Bytes from sub id's destination (from: the datagram's source, when the sub's packets are addressed).
  virtual void send(std::uint16_t id, std::string_view data, const destination* from, std::string& out) = 0;
  // Sub id (its number) is over on the server's side; tell: the client is told (error: it failed).
  virtual void closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) = 0;
  // The open just asked for id did not happen (its client's budget): the client is told it failed.
  virtual void open_refused(std::uint16_t id, std::string& out) = 0;
  // Whether a sub the client ended is told of its close all the same (sing-mux closes each side).
  virtual bool ends_after_client_end() const = 0;
  // The framing holds bytes for the client's windows past its bound: subs wait for room as for a full queue.
  virtual bool holding() const { return false; }
  // Bytes about to be written from `from` on (the VLESS response header before it goes as it is).
  virtual void seal(std::string& bytes, std::size_t from) {
    (void)bytes;
    (void)from;
  }
};

class sub_engine {
 public:
  // The first bytes for the client are the VLESS response header.
  sub_engine(session_core& s, client_stream& client, sub_framing& framing, const asio::any_io_executor& ex);
  sub_engine(const sub_engine&) = delete;
  sub_engine& operator=(const sub_engine&) = delete;
  ~sub_engine();

  // --- events from the framing ------------------------------------------------------------------
  // A New: sub id to d (d.net: tcp or udp; xudp: a UDP sub whose every datagram names its target), with its
  // first data. Refused (vless.sub line, framing told) past max_mux_subs or the client's upstream budget.
  void open(std::uint16_t id, const destination& d, bool xudp, std::optional<std::string_view> first);
  // Data for sub id, one datagram on a UDP sub (to: its own target; the replies then name theirs).
  void data(std::uint16_t id, std::string_view bytes, const destination* to = nullptr);
  void data(std::uint16_t id, std::string&& bytes, const destination* to = nullptr);
  // A target without data: sub id's replies name theirs from now on.
  void addressed(std::uint16_t id);
  // The client is done with sub id: a UDP sub ends, a TCP sub half-closes after what is queued.
  void end(std::uint16_t id);
  // Sub id broke its framing's rules: it ends with the error.
  void kill(std::uint16_t id, std::string_view reason);
  // A New or a frame the framing refused: a vless.sub line (the first mux_logged_refusals), counted.
  void refused(std::uint16_t id, const std::optional<destination>& d, std::string_view why,
               std::string_view detail = {});
  bool live(std::uint16_t id) const { return subs_.contains(id); }

  // --- back-pressure ------------------------------------------------------------------------------
  // A TCP sub's queue is past its window: the framing gives no more events until wait_for_full() returns.
  bool paused() const { return !full_.empty(); }
  awaitable<void> wait_for_full();

  // --- towards the client -------------------------------------------------------------------------
  // The framing's own answers go here (then answered()); the writer writes them with the subs' data.
  std::string& out() { return down_; }
  void answered();
  std::size_t unwritten() const { return down_.size(); }
  awaitable<void> wait_written();  // until the writer finished a write (or the engine stopped)

  // --- the session's side -------------------------------------------------------------------------
  void start();  // the writer towards the client
  void spawn(awaitable<void> task);
  // Ends every sub-connection now (the session's sockets are closing); idempotent.
  void stop();
  // stop(), then awaits every coroutine of the engine: the writer too (after what is queued), so the
  // session's TLS shutdown that follows writes alone.
  awaitable<void> join();
  bool stopping() const { return stopping_; }
  std::uint64_t subs() const { return opened_; }
  std::uint64_t refusals() const { return refused_; }

 private:
  using sub_ptr = std::shared_ptr<mux_sub_conn>;

  sub_ptr find(std::uint16_t id) const;
  // Whether c takes n more bytes (a UDP sub over its queue or its client's budget drops them).
  bool takes(mux_sub_conn& c, std::size_t n);
  void deliver(mux_sub_conn& c, std::string&& bytes, const destination* to);
  void queued(mux_sub_conn& c, std::int64_t n);
  void emitted() {
    sub_output_ = true;
    down_ready_.cancel();
  }
  awaitable<bool> wait_room(const mux_sub_conn& c);
  awaitable<void> down_writer();
  void finish(mux_sub_conn& c, std::string_view reason, std::string_view error = {}, std::string detail = {});
  awaitable<void> connect_deadline(sub_ptr c);
  awaitable<std::optional<allowed_endpoints>> resolve(mux_sub_conn& c, const destination& t);
  awaitable<void> tcp_sub(sub_ptr c);
  awaitable<void> tcp_sub_reader(sub_ptr c);
  void connected(mux_sub_conn& c);
  awaitable<void> udp_sub(sub_ptr c);
  awaitable<mux_udp_flow*> flow_for(mux_sub_conn& c, const destination& t);
  awaitable<void> udp_flow_reader(sub_ptr c, mux_udp_flow* fl);
  char* scratch();

  session_core& s_;
  client_stream& client_;
  sub_framing& framing_;
  asio::any_io_executor ex_;
  std::unordered_map<std::uint16_t, sub_ptr> subs_;
  std::size_t live_ = 0;  // subs neither ended by the client nor closed: max_mux_subs bounds them
  std::uint32_t opened_ = 0;
  std::string down_;  // bytes for the client, bounded by mux_down_limit (+ one frame, + ends and answers)
  bool header_out_ = false;
  bool sub_output_ = false;  // a sub's data or end went into down_
  asio::steady_timer down_ready_;
  asio::steady_timer down_space_;
  asio::steady_timer written_;
  asio::steady_timer joined_;
  asio::steady_timer drained_;  // wait_for_full waits here while full_ is not empty
  std::vector<sub_ptr> full_;   // TCP sub-connections past their queue limit
  std::size_t tasks_ = 0;
  bool stopping_ = false;
  std::uint64_t refused_ = 0;
  std::unique_ptr<char[]> scratch_;
};

}  // namespace vlessbench::vless_server::detail
