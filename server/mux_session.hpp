#pragma once
// VLESS command 3 (Mux.Cool, XUDP included) inside a session (server/vless_session.hpp; docs/sessions.md
// "Mux"): frames from the client (core/wire/mux_frame.hpp) go through the pure sub-connection table
// (core/runtime/mux_subs.hpp); each sub-connection dials its destination through the one dialer
// (server/upstream_dialer.hpp: the same [destinations] policy and route registration as a whole session's
// upstream), under a route_info of its own that names the session and the sub (route_info::sub), and is
// logged as a vless.sub line at its close.
//
// Independence of sub-connections. Mux.Cool has no window of its own: the underlying stream is its only flow
// control, so a server must stop reading it when a destination takes data slower than the client sends (else
// its queue grows without bound), and a server that stopped reading for as long as one destination is stalled
// would stall every other sub-connection. The bounded window here: each TCP sub-connection queues at most
// mux_sub_queue_limit bytes its destination has not taken; past it the client's stream is not read
// (backpressure, the sender's TCP window closes) until that queue drains to half, but for at most
// mux_stall_limit: a destination that has not drained by then is stalled, and its sub-connection alone ends
// with the error option (vless.sub error "sub_stalled"), after which reading goes on. So a slow destination
// is paced, a stalled one costs the others at most mux_stall_limit once, and memory stays bounded
// (max_mux_subs x the queue). UDP: mux_udp_queue_limit bytes; past it datagrams are dropped (counted:
// packets_dropped), as a full socket buffer would, without pausing anyone. Towards the client every
// sub-connection shares the one stream: frames wait in one queue of at most mux_down_limit bytes; a
// sub-connection with data waits for room, so a client that reads slowly slows all of them (it is the one
// reader of them all) and the min_rate rule applies.
//
// One object per mux session, owned by the session; coroutines per sub-connection (dial + relay towards the
// destination, relay back) and one writer towards the client, on the session's executor; join() awaits them.
//
// A sub-connection's state and the bounds above are server/mux_sub.hpp (no template); the pure decisions
// core/runtime/mux_subs, the framing core/wire/mux_frame.
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/log/access_events.hpp"
#include "server/client_budget.hpp"
#include "core/log/logging.hpp"
#include "core/wire/mux_frame.hpp"
#include "core/runtime/mux_subs.hpp"
#include "core/wire/net_address.hpp"
#include "core/runtime/route_registry.hpp"
#include "server/mux_sub.hpp"
#include "server/reject_code.hpp"
#include "server/relay_common.hpp"
#include "server/upstream_dialer.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

template <class Session>
class mux_relay {
  using udp = asio::ip::udp;

  using packet = mux_packet;
  using udp_flow = mux_udp_flow;
  using sub_conn = mux_sub_conn;
  using sub_ptr = std::shared_ptr<sub_conn>;

 public:
  mux_relay(Session& s, std::size_t pending)
      : s_(s),
        ex_(s.client.get_executor()),
        table_(s.cfg->limits.max_mux_subs),
        down_ready_(ex_, steady_clock::time_point::max()),
        down_space_(ex_, steady_clock::time_point::max()),
        joined_(ex_, steady_clock::time_point::max()),
        drained_(ex_) {
    acc_.assign(s.buf.data(), pending);
    filled_ = pending;
    std::vector<char>().swap(s.buf);
    down_.assign(vless::response_header.begin(), vless::response_header.end());
  }

  std::uint64_t subs() const { return table_.opened(); }
  std::uint64_t refused() const { return refused_; }
  std::string_view mux_error() const { return mux_error_; }

  // Reads and applies the client's frames until its stream ends or breaks the framing (the session's close
  // reason says which), then ends every sub-connection.
  awaitable<void> run() {
    // Under the session's `|| watchdog`: a cancellation is a closed socket here, seen as an error.
    co_await asio::this_coro::throw_if_cancelled(false);
    spawn(down_writer());
    for (;;) {
      std::size_t at = 0;
      while (!stopping_) {  // stopped: the session is over, its client's frames open nothing more
        const auto p = mux::parse_mux_frame(std::string_view(acc_.data(), filled_).substr(at));
        if (p.invalid()) {
          mux_error_ = p.reason;
          s_.reason = close_reason::mux_error;
          spdlog::debug("vless {} session {}: mux framing: {}", s_.listener_name, s_.info->session_id, p.reason);
          break;
        }
        if (!p.complete()) break;
        at += p.consumed;
        handle(p.value);
      }
      if (!mux_error_.empty()) break;
      // The rest moves to the front; the room after it is kept (a resize zero-filled 64 KiB per read).
      if (at > 0) std::memmove(acc_.data(), acc_.data() + at, filled_ - at);
      filled_ -= at;
      if (!full_.empty()) co_await wait_for_full();
      if (stopping_) break;
      if (acc_.size() < filled_ + relay_read) acc_.resize(filled_ + relay_read);
      auto [ec, n] =
          co_await s_.client.async_read_some(asio::buffer(acc_.data() + filled_, relay_read), as_tuple_awaitable);
      filled_ += n;
      if (ec) {
        if (!is_eof(ec) && s_.reason == close_reason::client_eof) s_.reason = close_reason::client_error;
        break;
      }
    }
    co_await join();
  }

  // Ends every sub-connection (idempotent) and waits until their coroutines are gone: the writer towards the
  // client too, so the session's TLS shutdown that follows writes alone. Each ends once its sockets are
  // closed; a write to a client that reads nothing ends with the session's watchdog (idle or minimum-rate
  // rule), which closes the client socket.
  awaitable<void> join() {
    stop();
    while (tasks_ > 0) {
      auto [ec] = co_await joined_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
  }

  // Ends every sub-connection now (the session's sockets are closing); idempotent.
  void stop() { stop_all(); }

 private:
  static constexpr std::size_t relay_read = 64 * 1024;

  // --- bookkeeping -------------------------------------------------------------------------------

  template <class Task>
  void spawn(Task task) {
    ++tasks_;
    asio::co_spawn(ex_, std::move(task), [this](const std::exception_ptr& e) {
      if (e) spdlog::error("vless {} session {}: mux task failed", s_.listener_name, s_.info->session_id);
      if (--tasks_ == 0) joined_.cancel();
    });
  }

  sub_ptr find(std::uint16_t id, std::uint32_t number) const {
    const auto it = subs_.find(id);
    return it != subs_.end() && it->second->number == number ? it->second : nullptr;
  }

  void stop_all() {
    if (!stopping_) {
      stopping_ = true;
      auto all = subs_;
      for (auto& [id, c] : all) finish(*c, "session_end");
    }
    down_ready_.cancel();
    down_space_.cancel();
    drained_.cancel();
  }

  // --- towards the client ------------------------------------------------------------------------

  void emit(const mux::frame& f) {
    mux::encode_mux_frame(down_, f);
    down_ready_.cancel();
  }

  void emit_end(std::uint16_t id, bool error) {
    if (stopping_) return;
    mux::frame f;
    f.id = id;
    f.st = mux::status::end;
    f.option = error ? mux::option_error : 0;
    emit(f);
  }

  // Room in the queue towards the client; false: the sub-connection or the session is over.
  awaitable<bool> wait_room(const sub_conn& c) {
    while (down_.size() >= mux_down_limit && !c.closed && !stopping_) {
      auto [ec] = co_await down_space_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
    co_return !c.closed && !stopping_;
  }

  awaitable<void> down_writer() {
    std::string out;
    for (;;) {
      if (down_.empty()) {
        if (stopping_) break;
        auto [ec] = co_await down_ready_.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      out.clear();
      out.swap(down_);
      down_space_.cancel();
      if (s_.info->phases.first_client_byte < 0 && out.size() > vless::response_header.size())
        s_.info->phases.first_client_byte = s_.now_us();
      s_.down_writing = true;
      auto [ec, n] =
          co_await asio::async_write(s_.client, asio::buffer(out), transfer_all_unchunked{}, as_tuple_awaitable);
      s_.down_writing = false;
      if (ec) {
        if (s_.reason == close_reason::client_eof) s_.reason = close_reason::client_error;
        stopping_ = true;
        std::error_code ignored;
        s_.client_socket().cancel(ignored);
        break;
      }
      s_.touch();
    }
    down_space_.cancel();
  }

  // --- frames from the client --------------------------------------------------------------------

  void handle(const mux::frame& f) {
    s_.touch();
    const mux::decision d = table_.on_frame(f);
    switch (d.act) {
      case mux::action::open: {
        // Its upstream socket's place in the client's budget (server/client_budget.hpp), before anything opens.
        auto taken = s_.budget->take_upstream(s_.cfg->limits.max_upstreams_per_connection,
                                              s_.cfg->limits.max_upstreams_per_client);
        if (!taken.slot) {
          table_.cancel_open(f.id);
          log_refusal(f, to_string(reject_code::client_budget), taken.detail);
          emit_end(f.id, true);
          break;
        }
        open(f, d.sub, std::move(*taken.slot));
        break;
      }
      case mux::action::deliver:
        if (auto c = find(f.id, d.sub)) deliver(*c, f);
        break;
      case mux::action::end:
        if (auto c = find(f.id, d.sub)) {
          c->client_end = true;
          // UDP has no half-close: the sub-connection is over. TCP: the writer half-closes after what is
          // queued; the destination's answer still comes back.
          if (c->udp())
            finish(*c, "client_end");
          else
            c->wake.cancel();
        }
        break;
      case mux::action::ignore: break;
      case mux::action::refuse:
        log_refusal(f, d.reason);
        emit_end(f.id, true);
        break;
      case mux::action::kill:
        if (auto c = find(f.id, d.sub)) finish(*c, "error", d.reason);
        break;
      case mux::action::stray:
        log_refusal(f, d.reason);
        if (f.st == mux::status::keep) emit_end(f.id, true);
        break;
    }
  }

  void log_refusal(const mux::frame& f, std::string_view why, std::string_view detail = {}) {
    if (refused_++ >= mux_logged_refusals) return;  // counted in the session line (subs_refused)
    emit_sub_refused(s_.rt, *s_.info, s_.listener_name, f, why, detail);
  }

  void open(const mux::frame& f, std::uint32_t number, connection_budget::upstream_slot slot) {
    auto c = std::make_shared<sub_conn>(s_.rt, ex_);
    c->slot.emplace(std::move(slot));
    c->id = f.id;
    c->number = number;
    c->target = *f.dest;
    c->xudp = f.global_id.has_value();
    c->dest = mux::format_target(c->target);
    c->name_route(*s_.info, s_.now_us());
    subs_[f.id] = c;
    if (f.has_data()) deliver(*c, f);
    if (c->closed) return;
    spawn(c->udp() ? udp_sub(c) : tcp_sub(c));
    spawn(connect_deadline(c));
  }

  void deliver(sub_conn& c, const mux::frame& f) {
    const bool keep_target = f.st == mux::status::keep && f.dest.has_value();  // a New's is the sub's own
    if (keep_target) c.addressed = true;
    if (!f.has_data()) return;
    const bool over_budget = s_.budget->over_buffered(s_.cfg->limits.max_buffered_per_client);
    if (c.udp()) {
      if (c.queued + f.data.size() > mux_udp_queue_limit || over_budget) {
        ++c.dropped;
        return;
      }
    }
    queued(c, static_cast<std::int64_t>(f.data.size()));
    c.queue.push_back(packet{std::string(f.data), keep_target ? f.dest : std::nullopt});
    c.wake.cancel();
    // Past its own window, or the client's address holds max_buffered_per_client already: the client's stream
    // waits for this sub-connection as for a full one.
    if (!c.udp() && !c.full && (c.queued > mux_sub_queue_limit || over_budget)) {
      c.full = true;
      full_.push_back(c.shared_from_this());
    }
  }

  // Bytes queued for c's destination change by n: c's window and its client's budget.
  void queued(sub_conn& c, std::int64_t n) {
    c.queued = static_cast<std::size_t>(static_cast<std::int64_t>(c.queued) + n);
    if (n > 0)
      s_.budget->add_buffered(static_cast<std::uint64_t>(n));
    else
      s_.budget->sub_buffered(static_cast<std::uint64_t>(-n));
  }

  // Before the next read of the client's stream: while a TCP sub-connection's queue is past its limit, wait
  // for it to drain to half, at most mux_stall_limit; then end whichever has not.
  awaitable<void> wait_for_full() {
    const auto until = steady_clock::now() + mux_stall_limit;
    for (;;) {
      std::erase_if(full_, [](const sub_ptr& c) { return c->closed || !c->full; });
      if (full_.empty() || stopping_) break;
      if (steady_clock::now() >= until) {
        auto stalled = std::move(full_);
        full_.clear();
        for (auto& c : stalled) finish(*c, "error", "sub_stalled");
        break;
      }
      drained_.expires_at(until);
      auto [ec] = co_await drained_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
  }

  // --- a sub-connection's end --------------------------------------------------------------------

  // Ends c once: sockets closed (route entries first), End sent unless the client ended it, a vless.sub line
  // written. close_reason: "client_end", "upstream_eof", "upstream_error", "rejected" (its destination
  // refused or unreachable), "error", "timeout", "session_end".
  void finish(sub_conn& c, std::string_view reason, std::string_view error = {}, std::string detail = {}) {
    if (c.closed) return;
    c.closed = true;
    c.close_sockets();
    queued(c, -static_cast<std::int64_t>(c.queued));
    c.slot.reset();
    if (c.full) {
      c.full = false;
      drained_.cancel();
    }
    if (const auto* st = table_.find(c.id); st != nullptr && st->sub == c.number) table_.closed(c.id);
    if (const auto it = subs_.find(c.id); it != subs_.end() && it->second.get() == &c) subs_.erase(it);
    // sing-mux's streams (server/sing_mux_session.hpp) are closed by each side: a client's FIN gets one back.
    bool end_back = !c.client_end;
    if constexpr (requires { Session::ends_after_client_end; }) end_back = true;
    if (end_back && reason != "session_end") emit_end(c.id, !error.empty() || reason == "upstream_error");
    down_space_.cancel();  // a writer of c waiting for room sees it closed
    emit_sub_closed(s_.rt, *s_.info, s_.listener_name, c, reason, error, detail);
  }

  // Resolve + connect (TCP), or the first destination's socket (UDP), within connect_timeout_ms.
  awaitable<void> connect_deadline(sub_ptr c) {
    if (c->closed || c->connected) co_return;  // before this started: no cancel() to wake it
    c->deadline.expires_after(s_.cfg->limits.connect_timeout);
    auto [ec] = co_await c->deadline.async_wait(as_tuple_awaitable);
    if (!ec && !c->connected) finish(*c, "rejected", to_string(reject_code::connect_timeout), c->dest);
  }

  // The target's addresses through the one dialer (server/upstream_dialer.hpp), every one allowed by
  // [destinations]; nullopt: c has ended (rejected when it is the New's own destination, else error).
  awaitable<std::optional<allowed_endpoints>> resolve(sub_conn& c, const mux::target& t) {
    const std::string_view how = c.connected ? "error" : "rejected";
    auto allowed = co_await c.dialer.resolve(t);
    if (c.closed) co_return std::nullopt;
    if (!allowed.ok()) {
      finish(c, how, allowed.failure.reason, std::move(allowed.failure.detail));
      co_return std::nullopt;
    }
    if (!c.connected && t.type == mux::address_type::domain) c.info->phases.resolved = s_.now_us();
    co_return std::move(allowed.value);
  }

  // --- TCP ---------------------------------------------------------------------------------------

  awaitable<void> tcp_sub(sub_ptr c) {
    const auto allowed = co_await resolve(*c, c->target);
    if (!allowed) co_return;
    tcp_policy applied;
    const auto failed = co_await c->dialer.connect(c->tcp_sock, *allowed, s_.listener->upstream_tcp, applied, c->info,
                                                   c->reg, [&c] { return c->closed; });
    if (c->closed) co_return;
    if (failed) {
      finish(*c, "rejected", failed->reason, failed->detail);
      co_return;
    }
    connected(*c);
    spawn(tcp_sub_reader(c));
    for (;;) {
      if (c->closed) co_return;
      if (c->queue.empty()) {
        if (c->client_end) {
          std::error_code ignored;
          c->tcp_sock.shutdown(tcp::socket::shutdown_send, ignored);
          co_return;
        }
        auto [ec] = co_await c->wake.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      packet p = std::move(c->queue.front());
      c->queue.pop_front();
      queued(*c, -static_cast<std::int64_t>(p.data.size()));
      auto [ec, n] = co_await asio::async_write(c->tcp_sock, asio::buffer(p.data), as_tuple_awaitable);
      if (c->closed) co_return;
      if (ec) {
        finish(*c, "upstream_error", "", ec.message());
        co_return;
      }
      c->bytes_up += n;
      s_.bytes_up += n;
      // Drained to half its window (and its client under budget), or empty.
      if (c->full && (c->queued == 0 || (c->queued <= mux_sub_queue_limit / 2 &&
                                         !s_.budget->over_buffered(s_.cfg->limits.max_buffered_per_client)))) {
        c->full = false;
        drained_.cancel();
      }
    }
  }

  void connected(sub_conn& c) {
    c.connected = true;
    c.deadline.cancel();
    const auto now = steady_clock::now();
    c.connect_us = std::chrono::duration_cast<microseconds>(now - c.opened).count();
    c.info->phases.upstream_connected = s_.now_us();
  }

  // Waits for the destination's bytes and for room towards the client, then reads into the relay's one
  // scratch buffer and frames at once: an open sub-connection holds no buffer of its own (there may be
  // max_upstreams_per_connection of them).
  awaitable<void> tcp_sub_reader(sub_ptr c) {
    std::error_code nb;
    c->tcp_sock.non_blocking(true, nb);
    for (;;) {
      auto [wec] = co_await c->tcp_sock.async_wait(tcp::socket::wait_read, as_tuple_awaitable);
      if (c->closed) co_return;
      if (!wec && !co_await wait_room(*c)) co_return;
      std::error_code ec = wec;
      std::size_t n = 0;
      if (!ec) n = c->tcp_sock.read_some(asio::buffer(scratch(), mux_frame_data), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
      if (ec) {
        if (is_eof(ec))
          finish(*c, c->client_end ? "client_end" : "upstream_eof");
        else
          finish(*c, "upstream_error", "", ec.message());
        co_return;
      }
      if (c->info->phases.first_upstream_byte < 0) c->info->phases.first_upstream_byte = s_.now_us();
      mux::frame k;
      k.id = c->id;
      k.st = mux::status::keep;
      k.option = mux::option_data;
      k.data = std::string_view(scratch(), n);
      emit(k);
      c->bytes_down += n;
      s_.bytes_down += n;
    }
  }

  // --- UDP ---------------------------------------------------------------------------------------

  awaitable<void> udp_sub(sub_ptr c) {
    if (co_await flow_for(*c, c->target) == nullptr) co_return;
    connected(*c);
    const auto idle = s_.cfg->limits.udp_idle_timeout;
    for (;;) {
      if (c->closed) co_return;
      if (c->queue.empty()) {
        const auto until = c->last + idle;
        if (steady_clock::now() >= until) {
          finish(*c, "timeout");
          co_return;
        }
        c->wake.expires_at(until);
        auto [ec] = co_await c->wake.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      packet p = std::move(c->queue.front());
      c->queue.pop_front();
      queued(*c, -static_cast<std::int64_t>(p.data.size()));
      c->last = steady_clock::now();
      udp_flow* fl = co_await flow_for(*c, p.to ? *p.to : c->target);
      if (fl == nullptr) co_return;
      auto [ec, n] = co_await fl->sock.async_send(asio::buffer(p.data), as_tuple_awaitable);
      if (c->closed) co_return;
      if (ec == asio::error::connection_refused) continue;  // an ICMP error for an earlier datagram
      if (ec) {
        finish(*c, "upstream_error", "", ec.message());
        co_return;
      }
      ++c->packets_up;
      c->bytes_up += n;
      s_.bytes_up += n;
    }
  }

  // The connected, registered socket for target t (one per destination, at most mux_udp_flows); nullptr: c
  // has ended with the reason.
  awaitable<udp_flow*> flow_for(sub_conn& c, const mux::target& t) {
    std::string key = mux::format_target(t);
    for (auto& fl : c.flows)
      if (fl->key == key) co_return fl.get();
    if (c.flows.size() >= mux_udp_flows) {
      finish(c, "error", "too_many_udp_destinations", key);
      co_return nullptr;
    }
    std::optional<connection_budget::upstream_slot> slot;
    if (!c.flows.empty()) {  // the first is the sub's own slot
      auto taken = s_.budget->take_upstream(s_.cfg->limits.max_upstreams_per_connection,
                                            s_.cfg->limits.max_upstreams_per_client);
      if (!taken.slot) {
        finish(c, "error", to_string(reject_code::client_budget), std::move(taken.detail));
        co_return nullptr;
      }
      slot = std::move(taken.slot);
    }
    const auto allowed = co_await resolve(c, t);
    if (!allowed) co_return nullptr;
    auto fl = std::make_unique<udp_flow>(ex_);
    fl->slot = std::move(slot);
    fl->key = std::move(key);
    if (const auto failed = c.dialer.connect(fl->sock, *allowed, c.info, fl->reg, fl->to)) {
      finish(c, c.connected ? "error" : "rejected", failed->reason, failed->detail);
      co_return nullptr;
    }
    udp_flow* raw = fl.get();
    c.flows.push_back(std::move(fl));
    spawn(udp_flow_reader(c.shared_from_this(), raw));
    co_return raw;
  }

  awaitable<void> udp_flow_reader(sub_ptr c, udp_flow* fl) {
    for (;;) {
      auto [ec] = co_await fl->sock.async_wait(udp::socket::wait_read, as_tuple_awaitable);
      if (c->closed || ec) co_return;
      if (!co_await wait_room(*c)) co_return;  // then read and frame at once, as tcp_sub_reader
      std::error_code rec;
      const std::size_t n = fl->sock.receive(asio::buffer(scratch(), mux_frame_data), 0, rec);
      if (rec == asio::error::would_block || rec == asio::error::try_again || rec == asio::error::connection_refused)
        continue;
      if (rec) {
        finish(*c, "upstream_error", "", rec.message());
        co_return;
      }
      c->last = steady_clock::now();
      if (c->info->phases.first_upstream_byte < 0) c->info->phases.first_upstream_byte = s_.now_us();
      mux::frame k;
      k.id = c->id;
      k.st = mux::status::keep;
      k.option = mux::option_data;
      k.data = std::string_view(scratch(), n);
      if (c->xudp || c->addressed) k.dest = destination_of(fl->to.address(), fl->to.port(), network::udp);
      emit(k);
      ++c->packets_down;
      c->bytes_down += n;
      s_.bytes_down += n;
    }
  }

  // Read into and framed before the next suspension, so one buffer serves every sub-connection.
  char* scratch() {
    if (!scratch_) scratch_ = std::make_unique<char[]>(mux_frame_data);
    return scratch_.get();
  }

  Session& s_;
  asio::any_io_executor ex_;
  mux::sub_table table_;
  std::unordered_map<std::uint16_t, sub_ptr> subs_;
  std::string acc_;  // client bytes not yet parsed (the first filled_): < one frame + one read, then room
  std::size_t filled_ = 0;
  std::string down_;  // frames for the client, bounded by mux_down_limit (+ one
                      // frame, + Ends)
  asio::steady_timer down_ready_;
  asio::steady_timer down_space_;
  asio::steady_timer joined_;
  asio::steady_timer drained_;  // the reader waits here while full_ is not empty
  std::vector<sub_ptr> full_;   // TCP sub-connections past their queue limit
  std::size_t tasks_ = 0;
  bool stopping_ = false;
  std::uint64_t refused_ = 0;
  std::string_view mux_error_;
  std::unique_ptr<char[]> scratch_;
};

}  // namespace vlessbench::vless_server::detail
