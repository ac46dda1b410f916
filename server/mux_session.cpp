#include "server/mux_session.hpp"

#include <cstring>

#include "core/log/logging.hpp"

namespace vlessbench::vless_server::detail {

mux_relay::mux_relay(session_core& s, client_stream& client, const asio::any_io_executor& ex, std::size_t pending)
    : s_(s), client_(client), table_(s.limits().max_mux_subs), engine_(s, client, *this, ex) {
  acc_ = s.take_payload(pending);
  filled_ = pending;
}

awaitable<void> mux_relay::run() {
  // Under the session's `|| watchdog`: a cancellation is a closed socket here, seen as an error.
  co_await asio::this_coro::throw_if_cancelled(false);
  engine_.start();
  for (;;) {
    std::size_t at = 0;
    while (!engine_.stopping()) {  // stopped: the session is over, its client's frames open nothing more
      const auto p = mux::parse_mux_frame(std::string_view(acc_.data(), filled_).substr(at));
      if (p.invalid()) {
        mux_error_ = p.reason;
        s_.relay_ends(close_reason::mux_error);
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
    if (engine_.paused()) co_await engine_.wait_for_full();
    if (engine_.stopping()) break;
    if (acc_.size() < filled_ + relay_read) acc_.resize(filled_ + relay_read);
    auto [ec, n] = co_await client_.read_some(asio::buffer(acc_.data() + filled_, relay_read));
    filled_ += n;
    if (ec) {
      if (!is_eof(ec)) s_.relay_fails(close_reason::client_error);
      break;
    }
  }
  co_await engine_.join();
}

void mux_relay::handle(const mux::frame& f) {
  s_.touch();
  const mux::decision d = table_.on_frame(f);
  switch (d.act) {
    case mux::action::open:
      engine_.open(f.id, *f.dest, f.global_id.has_value(),
                   f.has_data() ? std::optional<std::string_view>(f.data) : std::nullopt);
      break;
    case mux::action::deliver:
      if (!f.has_data()) {
        if (f.dest) engine_.addressed(f.id);
      } else {
        engine_.data(f.id, f.data, f.dest ? &*f.dest : nullptr);
      }
      break;
    case mux::action::end: engine_.end(f.id); break;
    case mux::action::ignore: break;
    case mux::action::refuse:
      engine_.refused(f.id, f.dest, d.reason);
      end_with_error(f.id, engine_.out());
      engine_.answered();
      break;
    case mux::action::kill: engine_.kill(f.id, d.reason); break;
    case mux::action::stray:
      engine_.refused(f.id, f.dest, d.reason);
      if (f.st == mux::status::keep) {
        end_with_error(f.id, engine_.out());
        engine_.answered();
      }
      break;
  }
}

void mux_relay::send(std::uint16_t id, std::string_view data, const destination* from, std::string& out) {
  mux::frame k;
  k.id = id;
  k.st = mux::status::keep;
  k.option = mux::option_data;
  k.data = data;
  if (from != nullptr) k.dest = *from;
  mux::encode_mux_frame(out, k);
}

void mux_relay::closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) {
  if (const auto* st = table_.find(id); st != nullptr && st->sub == number) table_.closed(id);
  if (!tell) return;
  mux::frame f;
  f.id = id;
  f.st = mux::status::end;
  f.option = error ? mux::option_error : 0;
  mux::encode_mux_frame(out, f);
}

void mux_relay::open_refused(std::uint16_t id, std::string& out) {
  table_.cancel_open(id);
  end_with_error(id, out);
}

// An End with the error option: a New refused, a Keep for an id never opened.
void mux_relay::end_with_error(std::uint16_t id, std::string& out) const {
  if (engine_.stopping()) return;
  mux::frame f;
  f.id = id;
  f.st = mux::status::end;
  f.option = mux::option_error;
  mux::encode_mux_frame(out, f);
}

}  // namespace vlessbench::vless_server::detail
