#include "server/sub_engine.hpp"

#include "core/log/logging.hpp"
#include "core/wire/vless_codec.hpp"

namespace vlessbench::vless_server::detail {

sub_engine::sub_engine(session_core& s, client_stream& client, sub_framing& framing, const asio::any_io_executor& ex)
    : s_(s),
      client_(client),
      framing_(framing),
      ex_(ex),
      down_ready_(ex_, steady_clock::time_point::max()),
      down_space_(ex_, steady_clock::time_point::max()),
      written_(ex_, steady_clock::time_point::max()),
      joined_(ex_, steady_clock::time_point::max()),
      drained_(ex_) {
  down_.assign(vless::response_header.begin(), vless::response_header.end());
}

sub_engine::~sub_engine() = default;

// --- bookkeeping ---------------------------------------------------------------------------------

void sub_engine::start() { spawn(down_writer()); }

void sub_engine::spawn(awaitable<void> task) {
  ++tasks_;
  asio::co_spawn(ex_, std::move(task), [this](const std::exception_ptr& e) {
    if (e) spdlog::error("vless {} session {}: mux task failed", s_.listener_name, s_.info->session_id);
    if (--tasks_ == 0) joined_.cancel();
  });
}

sub_engine::sub_ptr sub_engine::find(std::uint16_t id) const {
  const auto it = subs_.find(id);
  return it != subs_.end() ? it->second : nullptr;
}

void sub_engine::stop() {
  if (!stopping_) {
    stopping_ = true;
    auto all = subs_;
    for (auto& [id, c] : all) finish(*c, "session_end");
  }
  down_ready_.cancel();
  down_space_.cancel();
  written_.cancel();
  drained_.cancel();
}

awaitable<void> sub_engine::join() {
  stop();
  while (tasks_ > 0) {
    auto [ec] = co_await joined_.async_wait(as_tuple_awaitable);
    (void)ec;
  }
}

// --- towards the client --------------------------------------------------------------------------

void sub_engine::answered() {
  down_ready_.cancel();
  down_space_.cancel();  // the framing's windows may have opened: holding() changed
}

awaitable<void> sub_engine::wait_written() {
  if (stopping_) co_return;
  auto [ec] = co_await written_.async_wait(as_tuple_awaitable);
  (void)ec;
}

// Room in the queue towards the client; false: the sub-connection or the session is over.
awaitable<bool> sub_engine::wait_room(const mux_sub_conn& c) {
  while ((down_.size() >= mux_down_limit || framing_.holding()) && !c.closed && !stopping_) {
    auto [ec] = co_await down_space_.async_wait(as_tuple_awaitable);
    (void)ec;
  }
  co_return !c.closed && !stopping_;
}

awaitable<void> sub_engine::down_writer() {
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
    framing_.seal(out, header_out_ ? 0 : vless::response_header.size());
    header_out_ = true;
    if (s_.info->phases.first_client_byte < 0 && sub_output_) s_.info->phases.first_client_byte = s_.now_us();
    s_.writing_down(true);
    auto [ec, n] = co_await client_.write_all(asio::buffer(out));
    s_.writing_down(false);
    written_.cancel();
    if (ec) {
      s_.relay_fails(close_reason::client_error);
      stopping_ = true;
      client_.cancel();
      break;
    }
    s_.touch();
  }
  down_space_.cancel();
  written_.cancel();
}

// --- events from the framing ---------------------------------------------------------------------

void sub_engine::refused(std::uint16_t id, const std::optional<destination>& d, std::string_view why,
                         std::string_view detail) {
  if (refused_++ >= mux_logged_refusals) return;  // counted in the session line (subs_refused)
  emit_sub_refused(s_.rt, *s_.info, s_.listener_name, id, d, why, detail);
}

void sub_engine::open(std::uint16_t id, const destination& d, bool xudp, std::optional<std::string_view> first) {
  if (live_ >= s_.limits().max_mux_subs) {
    refused(id, d, "too_many_subs");
    framing_.open_refused(id, down_);
    emitted();
    return;
  }
  // Its upstream socket's place in the client's budget (server/client_budget.hpp), before anything opens.
  auto taken = s_.budget->take_upstream(s_.limits().max_upstreams_per_connection, s_.limits().max_upstreams_per_client);
  if (!taken.slot) {
    refused(id, d, to_string(reject_code::client_budget), taken.detail);
    framing_.open_refused(id, down_);
    emitted();
    return;
  }
  auto c = std::make_shared<mux_sub_conn>(s_.rt, ex_);
  c->slot.emplace(std::move(*taken.slot));
  c->id = id;
  c->number = ++opened_;
  c->target = d;
  c->xudp = xudp;
  c->dest = format_destination(d);
  c->name_route(*s_.info, s_.now_us());
  subs_[id] = c;
  ++live_;
  if (first && takes(*c, first->size())) deliver(*c, std::string(*first), nullptr);
  if (c->closed) return;
  spawn(c->udp() ? udp_sub(c) : tcp_sub(c));
  spawn(connect_deadline(c));
}

void sub_engine::addressed(std::uint16_t id) {
  if (auto c = find(id)) c->addressed = true;
}

void sub_engine::data(std::uint16_t id, std::string_view bytes, const destination* to) {
  auto c = find(id);
  if (!c) return;
  if (to != nullptr) c->addressed = true;
  if (takes(*c, bytes.size())) deliver(*c, std::string(bytes), to);
}

void sub_engine::data(std::uint16_t id, std::string&& bytes, const destination* to) {
  auto c = find(id);
  if (!c) return;
  if (to != nullptr) c->addressed = true;
  if (takes(*c, bytes.size())) deliver(*c, std::move(bytes), to);
}

void sub_engine::end(std::uint16_t id) {
  auto c = find(id);
  if (!c || c->client_end) return;
  c->client_end = true;
  --live_;
  // UDP has no half-close: the sub-connection is over. TCP: the writer half-closes after what is queued; the
  // destination's answer still comes back.
  if (c->udp())
    finish(*c, "client_end");
  else
    c->wake.cancel();
}

void sub_engine::kill(std::uint16_t id, std::string_view reason) {
  if (auto c = find(id)) finish(*c, "error", reason);
}

bool sub_engine::takes(mux_sub_conn& c, std::size_t n) {
  if (!c.udp()) return true;
  if (c.queued + n > mux_udp_queue_limit || s_.budget->over_buffered(s_.limits().max_buffered_per_client)) {
    ++c.dropped;
    return false;
  }
  return true;
}

void sub_engine::deliver(mux_sub_conn& c, std::string&& bytes, const destination* to) {
  const bool over_budget = s_.budget->over_buffered(s_.limits().max_buffered_per_client);
  queued(c, static_cast<std::int64_t>(bytes.size()));
  c.queue.push_back(mux_packet{std::move(bytes), to != nullptr ? std::optional(*to) : std::nullopt});
  c.wake.cancel();
  // Past its own window, or the client's address holds max_buffered_per_client already: the client's stream
  // waits for this sub-connection as for a full one.
  if (!c.udp() && !c.full && (c.queued > mux_sub_queue_limit || over_budget)) {
    c.full = true;
    full_.push_back(c.shared_from_this());
  }
}

// Bytes queued for c's destination change by n: c's window and its client's budget.
void sub_engine::queued(mux_sub_conn& c, std::int64_t n) {
  c.queued = static_cast<std::size_t>(static_cast<std::int64_t>(c.queued) + n);
  if (n > 0)
    s_.budget->add_buffered(static_cast<std::uint64_t>(n));
  else
    s_.budget->sub_buffered(static_cast<std::uint64_t>(-n));
}

// While a TCP sub-connection's queue is past its limit, wait for it to drain to half, at most mux_stall_limit;
// then end whichever has not.
awaitable<void> sub_engine::wait_for_full() {
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

// --- a sub-connection's end ----------------------------------------------------------------------

// Ends c once: sockets closed (route entries first), the framing told (unless the client ended it and the
// framing does not answer that), a vless.sub line written. close_reason: "client_end", "upstream_eof",
// "upstream_error", "rejected" (its destination refused or unreachable), "error", "timeout", "session_end".
void sub_engine::finish(mux_sub_conn& c, std::string_view reason, std::string_view error, std::string detail) {
  if (c.closed) return;
  c.closed = true;
  if (!c.client_end) --live_;
  c.close_sockets();
  queued(c, -static_cast<std::int64_t>(c.queued));
  c.slot.reset();
  if (c.full) {
    c.full = false;
    drained_.cancel();
  }
  if (const auto it = subs_.find(c.id); it != subs_.end() && it->second.get() == &c) subs_.erase(it);
  const bool tell = (!c.client_end || framing_.ends_after_client_end()) && reason != "session_end" && !stopping_;
  framing_.closed(c.id, c.number, tell, !error.empty() || reason == "upstream_error", down_);
  if (tell) emitted();
  down_space_.cancel();  // a writer of c waiting for room sees it closed
  emit_sub_closed(s_.rt, *s_.info, s_.listener_name, c, reason, error, detail);
}

// Resolve + connect (TCP), or the first destination's socket (UDP), within connect_timeout_ms.
awaitable<void> sub_engine::connect_deadline(sub_ptr c) {
  if (c->closed || c->connected) co_return;  // before this started: no cancel() to wake it
  c->deadline.expires_after(s_.limits().connect_timeout);
  auto [ec] = co_await c->deadline.async_wait(as_tuple_awaitable);
  if (!ec && !c->connected) finish(*c, "rejected", to_string(reject_code::connect_timeout), c->dest);
}

// The target's addresses through the one dialer (server/upstream_dialer.hpp), every one allowed by
// [destinations]; nullopt: c has ended (rejected when it is the New's own destination, else error).
awaitable<std::optional<allowed_endpoints>> sub_engine::resolve(mux_sub_conn& c, const destination& t) {
  const std::string_view how = c.connected ? "error" : "rejected";
  auto allowed = co_await c.dialer.resolve(t);
  if (c.closed) co_return std::nullopt;
  if (!allowed.ok()) {
    finish(c, how, allowed.failure.reason, std::move(allowed.failure.detail));
    co_return std::nullopt;
  }
  if (!c.connected && t.type == address_type::domain) c.info->phases.resolved = s_.now_us();
  co_return std::move(allowed.value);
}

void sub_engine::connected(mux_sub_conn& c) {
  c.connected = true;
  c.deadline.cancel();
  const auto now = steady_clock::now();
  c.connect_us = std::chrono::duration_cast<microseconds>(now - c.opened).count();
  c.info->phases.upstream_connected = s_.now_us();
}

// Read into and framed before the next suspension, so one buffer serves every sub-connection.
char* sub_engine::scratch() {
  if (!scratch_) scratch_ = std::make_unique<char[]>(mux_frame_data);
  return scratch_.get();
}

// --- TCP -----------------------------------------------------------------------------------------

awaitable<void> sub_engine::tcp_sub(sub_ptr c) {
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
    mux_packet p = std::move(c->queue.front());
    c->queue.pop_front();
    queued(*c, -static_cast<std::int64_t>(p.data.size()));
    auto [ec, n] = co_await asio::async_write(c->tcp_sock, asio::buffer(p.data), as_tuple_awaitable);
    if (c->closed) co_return;
    if (ec) {
      finish(*c, "upstream_error", "", ec.message());
      co_return;
    }
    c->bytes_up += n;
    s_.count_up(n);
    // Drained to half its window (and its client under budget), or empty.
    if (c->full && (c->queued == 0 || (c->queued <= mux_sub_queue_limit / 2 &&
                                       !s_.budget->over_buffered(s_.limits().max_buffered_per_client)))) {
      c->full = false;
      drained_.cancel();
    }
  }
}

// Waits for the destination's bytes and for room towards the client, then reads into the engine's one scratch
// buffer and frames at once: an open sub-connection holds no buffer of its own (there may be
// max_upstreams_per_connection of them).
awaitable<void> sub_engine::tcp_sub_reader(sub_ptr c) {
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
    framing_.send(c->id, std::string_view(scratch(), n), nullptr, down_);
    emitted();
    c->bytes_down += n;
    s_.count_down(n);
  }
}

// --- UDP -----------------------------------------------------------------------------------------

awaitable<void> sub_engine::udp_sub(sub_ptr c) {
  if (co_await flow_for(*c, c->target) == nullptr) co_return;
  connected(*c);
  const auto idle = s_.limits().udp_idle_timeout;
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
    mux_packet p = std::move(c->queue.front());
    c->queue.pop_front();
    queued(*c, -static_cast<std::int64_t>(p.data.size()));
    c->last = steady_clock::now();
    mux_udp_flow* fl = co_await flow_for(*c, p.to ? *p.to : c->target);
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
    s_.count_up(n);
  }
}

// The connected, registered socket for target t (one per destination, at most mux_udp_flows); nullptr: c has
// ended with the reason.
awaitable<mux_udp_flow*> sub_engine::flow_for(mux_sub_conn& c, const destination& t) {
  std::string key = format_destination(t);
  for (auto& fl : c.flows)
    if (fl->key == key) co_return fl.get();
  if (c.flows.size() >= mux_udp_flows) {
    finish(c, "error", "too_many_udp_destinations", key);
    co_return nullptr;
  }
  std::optional<connection_budget::upstream_slot> slot;
  if (!c.flows.empty()) {  // the first is the sub's own slot
    auto taken =
        s_.budget->take_upstream(s_.limits().max_upstreams_per_connection, s_.limits().max_upstreams_per_client);
    if (!taken.slot) {
      finish(c, "error", to_string(reject_code::client_budget), std::move(taken.detail));
      co_return nullptr;
    }
    slot = std::move(taken.slot);
  }
  const auto allowed = co_await resolve(c, t);
  if (!allowed) co_return nullptr;
  auto fl = std::make_unique<mux_udp_flow>(ex_);
  fl->slot = std::move(slot);
  fl->key = std::move(key);
  if (const auto failed = c.dialer.connect(fl->sock, *allowed, c.info, fl->reg, fl->to)) {
    finish(c, c.connected ? "error" : "rejected", failed->reason, failed->detail);
    co_return nullptr;
  }
  mux_udp_flow* raw = fl.get();
  c.flows.push_back(std::move(fl));
  spawn(udp_flow_reader(c.shared_from_this(), raw));
  co_return raw;
}

awaitable<void> sub_engine::udp_flow_reader(sub_ptr c, mux_udp_flow* fl) {
  for (;;) {
    auto [ec] = co_await fl->sock.async_wait(asio::ip::udp::socket::wait_read, as_tuple_awaitable);
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
    std::optional<destination> from;
    if (c->xudp || c->addressed) from = destination_of(fl->to.address(), fl->to.port(), network::udp);
    framing_.send(c->id, std::string_view(scratch(), n), from ? &*from : nullptr, down_);
    emitted();
    ++c->packets_down;
    c->bytes_down += n;
    s_.count_down(n);
  }
}

}  // namespace vlessbench::vless_server::detail
