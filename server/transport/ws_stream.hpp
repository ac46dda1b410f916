#pragma once
// WebSocket (transport = "ws", RFC 6455 server side) over TLS (Lower = tls_stream) or plain TCP
// (plain_stream): the upgrade (server/transport/upgrade.hpp), then binary frames both ways.
// Client frames are decoded in place in the caller's buffer (core/wire/ws_frame.hpp: masking
// enforced, fragments joined, a frame size cap); early data from the upgrade request comes first.
// Pings are answered: the pong goes out at once when no write is in progress, else ahead of the
// next data frame (one write at a time: the relay's writer and this reader never interleave
// bytes). The close handshake: a client's close frame is the stream's EOF (the destination's
// answer still flows back, as after a TCP half-close), and async_shutdown sends ours.
// A protocol violation ends the stream with close code 1002/1009 and failure() naming it.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "server/buffer_pool.hpp"
#include "core/wire/ws_frame.hpp"
#include "server/transport/upgrade.hpp"

namespace vlessbench {

template <class Lower>
class ws_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  // No half-close to tell the client of the destination's EOF: the session waits for the client
  // to close first (server/vless_session.hpp, [limits] close_linger_ms).
  static constexpr transport::abilities can{.lingers_after_upstream_eof = true};

  template <class... Args>
  explicit ws_stream(transport_spec t, Args&&... lower)
      : t_(std::move(t)),
        lower_(std::forward<Args>(lower)...),
        decoder_(ws::frame_rules{true, transport_spec::max_frame}),
        idle_(lower_.get_executor()) {
    idle_.expires_at(asio::steady_timer::time_point::max());
  }
  ws_stream(const ws_stream&) = delete;
  ws_stream& operator=(const ws_stream&) = delete;

  executor_type get_executor() { return lower_.get_executor(); }
  tcp::socket& socket() { return lower_.socket(); }
  std::optional<std::string_view> failure() const {
    if (!failure_) return std::nullopt;
    return *failure_;
  }
  transport::facts facts() const {
    transport::facts f = lower_.facts();
    f.transport = to_string(transport_kind::ws);
    f.early_data = early_bytes_;
    return f;
  }

  awaitable<std::error_code> open(const transport::open_clock& clock) {
    transport::upgrade_outcome out;
    if (auto ec = co_await transport::open_upgraded(lower_, t_, clock, out)) {
      failure_ = out.reason;
      co_return ec;
    }
    early_bytes_ = out.request.early_data.size();
    pending_ = std::move(out.request.early_data);
    // Frames sent right behind the request: decoded now, after the early data.
    if (!out.rest.empty()) {
      const auto step = decoder_.decode(out.rest.data(), out.rest.size());
      if (!step.reason.empty()) {
        failure_ = step.reason;
        co_return std::make_error_code(std::errc::protocol_error);
      }
      pending_.append(out.rest.data(), step.payload);
      note_controls();
    }
    co_return std::error_code{};
  }

  // Payload bytes; never 0 on success. A client's close frame reads as EOF.
  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    const asio::mutable_buffer b = *asio::buffer_sequence_begin(buffers);
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b, state = 0](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          char* data = static_cast<char*>(b.data());
          for (;;) {
            if (state == 1) {  // a raw read completed
              if (ec) return self.complete(ec, 0);
              std::size_t payload = 0;
              if (auto err = decode(data, n, payload)) return self.complete(err, payload);
              if (payload > 0) return self.complete(std::error_code{}, payload);
              state = 0;
            } else if (state == 2) {  // a control frame went out
              end_control_write();
              if (ec) return self.complete(ec, 0);
              state = 0;
            }
            if (!pending_.empty() || eof_pending_) {
              std::error_code out;
              const std::size_t k = take(data, b.size(), out);
              return asio::post(lower_.get_executor(), [s = std::move(self), out, k]() mutable { s.complete(out, k); });
            }
            if (!control_out_.empty() && !writing_) {
              state = 2;
              begin_control_write();
              return asio::async_write(lower_, asio::buffer(control_wire_), std::move(self));
            }
            state = 1;
            return lower_.async_read_some(b, std::move(self));
          }
        },
        token, lower_.socket());
  }

  // One binary frame of up to a pooled block's worth of the buffer; completes when all of it is
  // written, with the payload bytes it carried.
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    const asio::const_buffer b = *asio::buffer_sequence_begin(buffers);
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b, state = 0, chunk = std::size_t{0}](auto& self, std::error_code ec = {}, std::size_t = 0) mutable {
          if (state == 0 && writing_) {  // the reader's pong is on its way: wait for it
            return idle_.async_wait([s = std::move(self)](std::error_code) mutable { s(std::error_code{}, 0); });
          }
          if (state == 0) {
            state = 1;
            writing_ = true;
            out_ = buffer_pool::get();
            std::size_t used = 0;
            if (!control_out_.empty()) {  // a pending pong goes first
              std::memcpy(out_.get(), control_out_.data(), control_out_.size());
              used = control_out_.size();
              control_out_.clear();
            }
            chunk = std::min(b.size(), buffer_pool::block_size - used - ws::max_header_bytes);
            used += ws::encode_frame_header(out_.get() + used, ws::opcode::binary, true, chunk, nullptr);
            std::memcpy(out_.get() + used, b.data(), chunk);
            used += chunk;
            return asio::async_write(lower_, asio::buffer(out_.get(), used), std::move(self));
          }
          out_.reset();
          end_control_write();
          self.complete(ec, ec ? 0 : chunk);
        },
        token, lower_.socket());
  }

  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this, started = false](auto& self, std::error_code ec = {}) mutable {
          if (started) return self.complete(ec);
          started = true;
          if (!pending_.empty() || eof_pending_)
            return asio::post(lower_.get_executor(),
                              [s = std::move(self)]() mutable { s.complete(std::error_code{}); });
          lower_.async_wait_readable(std::move(self));
        },
        token, lower_.socket());
  }

  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    ec.clear();
    if (!pending_.empty() || eof_pending_) return take(data, size, ec);
    // Bytes that decode to control frames or a partial header only: read on while bytes come.
    for (;;) {
      const std::size_t n = lower_.read_now(data, size, ec);
      if (n == 0) return 0;
      std::size_t payload = 0;
      if (auto err = decode(data, n, payload)) {
        if (payload > 0) return payload;  // the error shows on the next read
        ec = err;
        return 0;
      }
      if (payload > 0) return payload;
    }
  }

  // Frames are decoded in the caller's buffer: what is read ahead is the lower layer's.
  void release_read_ahead() { lower_.release_read_ahead(); }

  // Our close frame (1000, or the violation's code), then the lower layer's close.
  template <class Token>
  auto async_shutdown(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this, state = 0](auto& self, std::error_code ec = {}, std::size_t = 0) mutable {
          if (state == 0) {
            state = 1;
            if (!close_sent_) {
              close_sent_ = true;
              control_wire_ = close_frame(close_code_);
              return asio::async_write(lower_, asio::buffer(control_wire_), std::move(self));
            }
          }
          if (state == 1) {
            state = 2;
            // The client closed first and has our answer: the close handshake is done (RFC 6455
            // §7.1.1: the server closes TCP now), with no TLS close_notify round to wait for.
            if (ec || decoder_.close_received()) return self.complete(ec);
            return lower_.async_shutdown([s = std::move(self)](std::error_code e) mutable { s(e, 0); });
          }
          self.complete(ec);
        },
        token, lower_.socket());
  }

 private:
  static std::string close_frame(std::uint16_t code) {
    char head[ws::max_header_bytes];
    const std::size_t n = ws::encode_frame_header(head, ws::opcode::close, true, 2, nullptr);
    std::string f(head, n);
    f += static_cast<char>(code >> 8);
    f += static_cast<char>(code & 0xff);
    return f;
  }

  // Decodes raw bytes in place; an error (not EOF) on a violation. A close frame: EOF after the
  // payload decoded with it.
  std::error_code decode(char* data, std::size_t n, std::size_t& payload) {
    const auto step = decoder_.decode(data, n);
    payload = step.payload;
    note_controls();
    if (!step.reason.empty()) {
      failure_ = step.reason;
      close_code_ = failure_ == "frame_too_large" ? ws::close_too_big : ws::close_protocol_error;
      return std::make_error_code(std::errc::protocol_error);
    }
    if (decoder_.close_received() && payload == 0) {
      eof_pending_ = false;
      return asio::error::eof;
    }
    return {};
  }

  // Pings get a pong (the latest one only, as RFC 6455 §5.5.3 allows); a close makes EOF pending.
  void note_controls() {
    for (auto& c : decoder_.controls()) {
      if (c.op == ws::opcode::ping) {
        char head[ws::max_header_bytes];
        const std::size_t n = ws::encode_frame_header(head, ws::opcode::pong, true, c.payload.size(), nullptr);
        control_out_.assign(head, n);
        control_out_ += c.payload;
      } else if (c.op == ws::opcode::close) {
        eof_pending_ = true;
      }
    }
    decoder_.controls().clear();
  }

  std::size_t take(char* data, std::size_t size, std::error_code& ec) {
    if (pending_.empty()) {
      eof_pending_ = false;
      ec = asio::error::eof;
      return 0;
    }
    const std::size_t k = std::min(size, pending_.size());
    std::memcpy(data, pending_.data(), k);
    pending_.erase(0, k);
    if (pending_.empty()) std::string().swap(pending_);
    return k;
  }

  void begin_control_write() {
    writing_ = true;
    control_wire_ = std::move(control_out_);
    control_out_.clear();
  }
  // A write (data or control) ended: a writer waiting for it may go.
  void end_control_write() {
    writing_ = false;
    idle_.cancel();
  }

  transport_spec t_;
  Lower lower_;
  ws::frame_decoder decoder_;
  asio::steady_timer idle_;  // a data write waits on it while the reader's pong is written
  std::optional<std::string> failure_;
  std::string pending_;       // payload decoded ahead of the caller (early data, frames behind the head)
  bool eof_pending_ = false;  // a close frame came with payload still to hand over
  std::string control_out_;   // a pong to send
  std::string control_wire_;  // the control frame being written
  buffer_pool::block out_;    // the data frame being written
  bool writing_ = false;
  bool close_sent_ = false;
  std::uint16_t close_code_ = ws::close_normal;
  std::size_t early_bytes_ = 0;
};

}  // namespace vlessbench
