#include "server/sing_mux_session.hpp"

#include <memory>
#include <utility>

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "server/sing_mux_h2.hpp"

namespace vlessbench::vless_server::detail {

sing_mux_relay::sing_mux_relay(session_core& s, client_stream& client, const asio::any_io_executor& ex,
                               std::size_t pending)
    : s_(s),
      client_(client),
      framing_(
          s.limits().max_mux_subs, static_cast<std::uint32_t>(s.info->session_id),
          [max = s.limits().max_mux_subs] { return std::make_unique<sing_mux_h2>(static_cast<std::uint32_t>(max)); }),
      engine_(s, client, *this, ex),
      events_ready_(ex, steady_clock::time_point::max()),
      reader_wake_(ex, steady_clock::time_point::max()),
      reader_done_(ex, steady_clock::time_point::max()) {
  first_ = s.take_payload(pending);
}

awaitable<void> sing_mux_relay::run() {
  co_await asio::this_coro::throw_if_cancelled(false);
  engine_.start();
  reading_ = true;
  asio::co_spawn(events_ready_.get_executor(), reader(), [this](const std::exception_ptr& e) {
    if (e) spdlog::error("vless {} session {}: sing-mux reader failed", s_.listener_name, s_.info->session_id);
    reading_ = false;
    reader_done_.cancel();
  });
  co_await take_events();
  co_await join();
}

awaitable<void> sing_mux_relay::join() {
  co_await engine_.join();
  stop();
  if (reading_) client_.cancel();  // the reader's read, if the events ended first
  while (reading_) {
    auto [ec] = co_await reader_done_.async_wait(as_tuple_awaitable);
    (void)ec;
  }
}

void sing_mux_relay::stop() {
  engine_.stop();
  stopped_ = true;
  events_ready_.cancel();
  reader_wake_.cancel();
}

// Reads the client and turns its bytes into events. With windows (yamux, smux version 2, h2mux) on at once,
// whether or not the engine takes events: the client's window updates and pings must get through while the
// engine pauses for a full sub (else the way back could wait on the way up, and the way up on the way back), and
// the windows bound what waits. Without (smux version 1) only as fast as the engine takes them, as a Mux.Cool
// client is read.
awaitable<void> sing_mux_relay::reader() {
  for (;;) {
    if (stopped_ || engine_.stopping()) break;
    if (engine_.unwritten() >= sing_mux_out_limit) {  // the client reads nothing of what we answer: wait for it
      co_await engine_.wait_written();
      continue;
    }
    if (!framing_.windowed() && event_bytes_ >= read_size) {
      auto [ec] = co_await reader_wake_.async_wait(as_tuple_awaitable);
      (void)ec;
      continue;
    }
    std::string in;
    if (!first_.empty()) {
      in = std::exchange(first_, {});
    } else {
      in.resize(read_size);
      auto [ec, n] = co_await client_.read_some(asio::buffer(in));
      if (ec) {
        read_error_ = ec;
        break;
      }
      in.resize(n);
    }
    const std::size_t before = events_.size();
    const std::string_view e = framing_.up(in, events_, engine_.out());
    for (std::size_t i = before; i < events_.size(); ++i) event_bytes_ += events_[i].data.size();
    log_refusals();
    engine_.answered();
    events_ready_.cancel();
    if (!e.empty()) {
      fail(e);
      break;
    }
  }
  events_ready_.cancel();
}

// The events in their order, while the engine takes them (a full sub pauses it: server/sub_engine.hpp).
awaitable<void> sing_mux_relay::take_events() {
  for (;;) {
    while (!events_.empty() && !stopped_ && !engine_.stopping()) {
      if (engine_.paused()) {
        co_await engine_.wait_for_full();
        continue;
      }
      sing_mux::sub_event e = std::move(events_.front());
      events_.pop_front();
      event_bytes_ -= e.data.size();
      apply(e);
    }
    reader_wake_.cancel();
    if (stopped_ || engine_.stopping()) {
      s_.relay_fails(close_reason::client_error);
      break;
    }
    if (read_error_) {
      if (!is_eof(read_error_)) s_.relay_fails(close_reason::client_error);
      break;
    }
    auto [ec] = co_await events_ready_.async_wait(as_tuple_awaitable);
    (void)ec;
  }
}

void sing_mux_relay::apply(sing_mux::sub_event& e) {
  using kind = sing_mux::sub_event::kind_t;
  switch (e.kind) {
    case kind::open:
      s_.touch();
      engine_.open(e.id, *e.dest, false, e.has_data ? std::optional<std::string_view>(e.data) : std::nullopt);
      break;
    case kind::data:
      s_.touch();
      engine_.data(e.id, std::move(e.data), e.dest ? &*e.dest : nullptr);
      break;
    case kind::end:
      s_.touch();
      engine_.end(e.id);
      break;
    case kind::credit:
      framing_.consumed(e.stream, e.bytes, engine_.out());
      engine_.answered();
      break;
  }
}

// The client broke the framing: the session ends with why, whatever the engine and its writer are doing (the
// events from before the error are not taken: the session is over).
void sing_mux_relay::fail(std::string_view why) {
  error_ = why;
  s_.relay_ends(close_reason::mux_error);
  spdlog::debug("vless {} session {}: sing-mux: {}", s_.listener_name, s_.info->session_id, why);
  read_error_ = asio::error::invalid_argument;
  events_.clear();
  event_bytes_ = 0;
  stop();
  client_.cancel();  // the writer's write to a client that does not read
}

void sing_mux_relay::closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) {
  (void)number;
  if (tell) framing_.closed(id, error, out);
}

void sing_mux_relay::seal(std::string& bytes, std::size_t from) {
  if (!framing_.sealing() || from >= bytes.size()) return;
  std::string sealed = framing_.seal(bytes.substr(from));
  bytes.resize(from);
  bytes += sealed;
}

void sing_mux_relay::log_refusals() {
  for (const auto& r : framing_.take_refusals()) {
    // The event holds views: the detail text must outlive it (a temporary here was read freed).
    std::string detail = fmt::format("sing-mux {} stream {}", protocol(), r.stream);
    if (!r.note.empty()) detail += fmt::format(": {:.64}", r.note);
    const vless_sub_event e{.session = s_.info->session_id,
                            .listener = s_.listener_name,
                            .user = s_.info->user,
                            .dest = r.dest,
                            .close_reason = "rejected",
                            .error = r.reason,
                            .detail = detail};
    s_.rt.events.emit(e);
  }
}

}  // namespace vlessbench::vless_server::detail
