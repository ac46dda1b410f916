#pragma once
// sing-mux (sing-box's and mihomo's multiplex; a VLESS TCP request to sp.mux.sing-box.arpa) inside a session
// (server/vless_session.hpp; docs/sessions.md "sing-mux"): the pure translator core/runtime/sing_mux_bridge.hpp
// turns the client's smux/yamux/h2mux streams (h2mux's HTTP/2 on server/sing_mux_h2.hpp) into the Mux.Cool frames the
// relay of server/mux_session.hpp serves, and that relay's frames back. So every stream is a sub of the session as a
// Mux.Cool sub is, through the same dialer, destination policy, per-sub bounds, client budget, vless.sub line and
// `sub=N` route; only the wire differs. This file moves bytes: the relay reads and writes a stream of Mux.Cool bytes
// (relay_stream) whose other side is the client's transport, one reader of the client (see reader() for when it waits),
// one writer towards the client (the relay's frames and the translator's own answers: yamux ACKs, pongs, window
// updates), and the translator's refusals as vless.sub lines. A write waits while the translator holds more than
// sing_mux_held_limit bytes for windows the client has not opened: the relay's writer then waits too, as it does for a
// client that reads slowly.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/sing_mux_bridge.hpp"
#include "server/sing_mux_h2.hpp"
#include "server/mux_session.hpp"

namespace vlessbench::vless_server::detail {

constexpr std::size_t sing_mux_held_limit = 1u << 20;
// Answers for the client (yamux ACKs and pongs, window updates, refusals) waiting to be written: past it
// the client is not read until the writer has written them, so a client that sends and never reads costs
// this much, and the minimum-rate rule ends it (slow_transfer) as it does any peer that does not take
// what is written to it.
constexpr std::size_t sing_mux_out_limit = 256u << 10;

template <class Session>
class sing_mux_relay {
  // The Mux.Cool byte stream the relay reads and writes (an AsyncReadStream/AsyncWriteStream for Asio).
  class relay_stream {
   public:
    using executor_type = asio::any_io_executor;
    explicit relay_stream(sing_mux_relay& r) : r_(r) {}
    executor_type get_executor() const { return r_.ex_; }

    template <class Buffers, class Token>
    auto async_read_some(const Buffers& b, Token&& token) {
      const asio::mutable_buffer buf = *asio::buffer_sequence_begin(b);
      return asio::async_initiate<Token, void(std::error_code, std::size_t)>(
          [this](auto handler, asio::mutable_buffer into) {
            asio::co_spawn(r_.ex_, r_.read_for_relay(into), finisher(std::move(handler)));
          },
          token, buf);
    }

    template <class Buffers, class Token>
    auto async_write_some(const Buffers& b, Token&& token) {
      std::string bytes(asio::buffer_size(b), '\0');
      asio::buffer_copy(asio::buffer(bytes), b);
      return asio::async_initiate<Token, void(std::error_code, std::size_t)>(
          [this](auto handler, std::string data) {
            asio::co_spawn(r_.ex_, r_.write_from_relay(std::move(data)), finisher(std::move(handler)));
          },
          token, std::move(bytes));
    }

   private:
    template <class Handler>
    static auto finisher(Handler h) {
      return [h = std::move(h)](const std::exception_ptr& e, std::pair<std::error_code, std::size_t> r) mutable {
        if (e) r = {asio::error::operation_aborted, 0};
        std::move(h)(r.first, r.second);
      };
    }
    sing_mux_relay& r_;
  };

 public:
  // What the Mux.Cool relay knows of its session: the session's own state, but this stream for a client.
  struct view {
    Session& s;
    runtime& rt;
    std::shared_ptr<listener_runtime>& listener;
    std::shared_ptr<const config>& cfg;
    std::string& listener_name;
    std::shared_ptr<route_info>& info;
    std::shared_ptr<connection_budget>& budget;
    close_reason& reason;
    std::uint64_t& bytes_up;
    std::uint64_t& bytes_down;
    bool& down_writing;
    relay_stream client;
    std::vector<char> buf = std::vector<char>(1);        // the relay takes no payload of its own: the bridge has it
    static constexpr bool ends_after_client_end = true;  // a stream half-closed by the client still gets a FIN
    void touch() { s.touch(); }
    std::int64_t now_us() const { return s.now_us(); }
    tcp::socket& client_socket() { return s.client_socket(); }
  };

  sing_mux_relay(Session& s, std::size_t pending)
      : s_(s),
        ex_(s.client.get_executor()),
        bridge_(s.cfg->limits.max_mux_subs, static_cast<std::uint32_t>(s.info->session_id),
                [max = s.cfg->limits.max_mux_subs] {
                  return std::make_unique<sing_mux_h2>(static_cast<std::uint32_t>(max));
                }),
        view_{s,        s.rt,     s.listener, s.cfg,        s.listener_name, s.info,
              s.budget, s.reason, s.bytes_up, s.bytes_down, s.down_writing,  relay_stream(*this)},
        relay_(view_, 0),
        ready_(ex_, steady_clock::time_point::max()),
        written_(ex_, steady_clock::time_point::max()),
        for_relay_ready_(ex_, steady_clock::time_point::max()),
        reader_wake_(ex_, steady_clock::time_point::max()),
        tasks_done_(ex_, steady_clock::time_point::max()) {
    first_.assign(s.buf.data(), pending);
    std::vector<char>().swap(s.buf);
    out_.assign(vless::response_header.begin(), vless::response_header.end());
    ++queued_;
  }

  std::uint64_t subs() const { return relay_.subs(); }
  std::uint64_t refused() const { return relay_.refused() + bridge_.refused(); }
  std::string_view mux_error() const { return error_.empty() ? relay_.mux_error() : error_; }
  std::string_view protocol() const {
    return bridge_.header() ? sing_mux::to_string(bridge_.header()->proto) : std::string_view();
  }

  awaitable<void> run() {
    co_await asio::this_coro::throw_if_cancelled(false);
    spawn(writer());
    spawn(reader());
    co_await relay_.run();
    co_await join();
  }

  // The relay's tasks, then the writer and the reader: none is left when the session shuts TLS down.
  awaitable<void> join() {
    co_await relay_.join();
    stop();
    if (tasks_ > 0) {
      std::error_code ignored;
      s_.client_socket().cancel(ignored);  // the reader's read, if the relay ended first
    }
    while (tasks_ > 0) {
      auto [ec] = co_await tasks_done_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
  }

  void stop() {
    relay_.stop();
    stopped_ = true;
    ready_.cancel();
    written_.cancel();
    for_relay_ready_.cancel();
    reader_wake_.cancel();
  }

 private:
  using result = std::pair<std::error_code, std::size_t>;
  static constexpr std::size_t read_size = 64 * 1024;

  // The relay wants Mux.Cool bytes: what the reader has translated; each read credits its streams' windows.
  awaitable<result> read_for_relay(asio::mutable_buffer into) {
    for (;;) {
      if (!for_relay_.empty()) {
        const std::size_t n = std::min(into.size(), for_relay_.size());
        std::copy_n(for_relay_.data(), n, static_cast<char*>(into.data()));
        for_relay_.erase(0, n);
        std::string answers;
        bridge_.relay_consumed(n, answers);
        enqueue(std::move(answers));
        reader_wake_.cancel();
        co_return result{{}, n};
      }
      if (read_error_) co_return result{read_error_, 0};
      if (stopped_) co_return result{asio::error::operation_aborted, 0};
      auto [ec] = co_await for_relay_ready_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
  }

  // Reads the client and translates. With windows (yamux, smux version 2) on at once, whether or not the
  // relay is reading: the client's window updates and pings must get through while the relay pauses for a
  // full sub (else the way back could wait on the way up, and the way up on the way back), and the windows
  // bound what waits. Without (smux version 1) only as fast as the relay reads, as a Mux.Cool client is.
  awaitable<void> reader() {
    for (;;) {
      if (stopped_) break;
      if (out_.size() >= sing_mux_out_limit) {  // the client reads nothing of what we answer: wait for it
        auto [ec] = co_await written_.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      if (!bridge_.windowed() && for_relay_.size() >= read_size) {
        auto [ec] = co_await reader_wake_.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      std::string in;
      if (!first_.empty()) {
        in = std::exchange(first_, {});
      } else {
        in.resize(read_size);
        auto [ec, n] = co_await s_.client.async_read_some(asio::buffer(in), as_tuple_awaitable);
        if (ec) {
          read_error_ = ec;
          break;
        }
        in.resize(n);
      }
      std::string answers;
      const std::string_view e = bridge_.up(in, for_relay_, answers);
      log_refusals();
      enqueue(std::move(answers));
      for_relay_ready_.cancel();
      if (!e.empty()) {
        fail(e);
        break;
      }
    }
    for_relay_ready_.cancel();
  }

  // The client broke the framing: the session ends with why, whatever the relay and the writer are
  // doing (the relay's frames from before the error are not read: the session is over).
  void fail(std::string_view why) {
    error_ = why;
    s_.reason = close_reason::mux_error;
    spdlog::debug("vless {} session {}: sing-mux: {}", s_.listener_name, s_.info->session_id, why);
    read_error_ = asio::error::invalid_argument;
    for_relay_.clear();
    stop();
    std::error_code ignored;
    s_.client_socket().cancel(ignored);  // the writer's write to a client that does not read
  }

  // The relay's frames: translated, queued, and the write done once they are on their way to the client.
  awaitable<result> write_from_relay(std::string data) {
    const std::size_t n = data.size();
    std::string_view frames(data);
    const std::size_t skip = std::min(relay_header_left_, frames.size());  // the relay's VLESS response header
    relay_header_left_ -= skip;
    frames.remove_prefix(skip);
    std::string out;
    if (const std::string_view e = bridge_.down(frames, out); !e.empty()) {
      error_ = e;
      co_return result{asio::error::invalid_argument, 0};
    }
    const std::uint64_t mine = enqueue(std::move(out));
    while (!stopped_ && (written_seq_ < mine || bridge_.held() > sing_mux_held_limit)) {
      auto [ec] = co_await written_.async_wait(as_tuple_awaitable);
      (void)ec;
    }
    co_return stopped_ ? result{asio::error::operation_aborted, 0} : result{{}, n};
  }

  template <class Task>
  void spawn(Task task) {
    ++tasks_;
    asio::co_spawn(ex_, std::move(task), [this](const std::exception_ptr& e) {
      if (e) spdlog::error("vless {} session {}: sing-mux task failed", s_.listener_name, s_.info->session_id);
      if (--tasks_ == 0) tasks_done_.cancel();
    });
  }

  std::uint64_t enqueue(std::string bytes) {
    if (!bytes.empty()) {
      out_.append(bytes);
      ++queued_;
      ready_.cancel();
    }
    return queued_;
  }

  awaitable<void> writer() {
    bool first = true;  // the VLESS response header goes out as it is, before the sing-mux layer
    for (;;) {
      if (out_.empty()) {
        if (stopped_) break;
        auto [ec] = co_await ready_.async_wait(as_tuple_awaitable);
        (void)ec;
        continue;
      }
      const std::uint64_t batch = queued_;
      std::string bytes = std::exchange(out_, {});
      if (first) {
        const std::size_t h = vless::response_header.size();
        bytes = bytes.substr(0, h) + bridge_.seal(bytes.substr(h));
        first = false;
      } else {
        bytes = bridge_.seal(std::move(bytes));
      }
      s_.down_writing = true;  // the minimum-rate rule watches this write
      auto [ec, n] =
          co_await asio::async_write(s_.client, asio::buffer(bytes), transfer_all_unchunked{}, as_tuple_awaitable);
      s_.down_writing = false;
      if (ec) {
        if (s_.reason == close_reason::client_eof) s_.reason = close_reason::client_error;
        stop();
        std::error_code ignored;
        s_.client_socket().cancel(ignored);
        break;
      }
      s_.touch();
      written_seq_ = batch;
      written_.cancel();
    }
    written_.cancel();
  }

  void log_refusals() {
    for (const auto& r : bridge_.take_refusals()) {
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

  Session& s_;
  asio::any_io_executor ex_;
  sing_mux::bridge bridge_;
  view view_;
  mux_relay<view> relay_;
  asio::steady_timer ready_;            // the writer waits here for bytes
  asio::steady_timer written_;          // writes from the relay wait here for theirs to go
  asio::steady_timer for_relay_ready_;  // the relay's reads wait here for translated bytes
  asio::steady_timer reader_wake_;      // the reader (without windows) waits here for the relay to read
  asio::steady_timer tasks_done_;       // join() waits here for the writer and the reader
  std::string first_;                   // the payload that came with the VLESS header
  std::string for_relay_;               // Mux.Cool bytes the relay has not read yet
  std::string out_;                     // bytes for the client
  std::uint64_t queued_ = 0, written_seq_ = 0;
  std::size_t relay_header_left_ = vless::response_header.size();
  std::size_t tasks_ = 0;
  std::error_code read_error_;  // the client's stream ended or broke: the relay's next read says so
  bool stopped_ = false;
  std::string_view error_;
};

}  // namespace vlessbench::vless_server::detail
