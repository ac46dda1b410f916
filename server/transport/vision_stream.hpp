#pragma once
// Raw TLS with XTLS Vision (flow "xtls-rprx-vision", docs/sessions.md "Vision"): the raw-TLS
// listeners' transport. Until a session turns Vision on (start_vision, after its header named
// the flow) every call goes straight to the tls_stream beneath. With Vision on, reads remove the
// client's padding (core/wire/vision.hpp) and writes pad ours, both watching for a TLS handshake
// inside; once a direction's last padded frame says direct, that direction's bytes go to and
// from the TCP socket beneath the TLS, starting with what the TLS had already read
// (tls_stream::hand_over). The session above sees the same plain stream throughout and counts
// the same payload bytes; its upstream socket, and with it the route proof, is untouched.
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "core/log/access_events.hpp"
#include "core/net/socket_policy.hpp"
#include "core/wire/vision.hpp"
#include "server/transport/tls_stream.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench {

class vision_stream {
 public:
  using executor_type = tls_stream::executor_type;
  static constexpr transport::abilities can{.vision = true};

  vision_stream(policy_stream next, asio::ssl::context& ctx) : tls_(std::move(next), ctx) {}

  executor_type get_executor() { return tls_.get_executor(); }
  tcp::socket& socket() { return tls_.socket(); }
  std::optional<std::string_view> failure() const { return tls_.failure(); }
  transport::facts facts() const { return tls_.facts(); }
  awaitable<std::error_code> open(const transport::open_clock& clock) {
    accepted_ = clock.accepted;
    return tls_.open(clock);
  }

  // Vision from here on: pending holds the stream bytes that came with the request header; they
  // are unpadded in place (n becomes the content among them). The result: a reject reason when
  // that padding breaks Vision's framing. response_bytes: the VLESS response header, which
  // leaves unpadded before our frames.
  std::optional<std::string_view> start_vision(const uuid_bytes& uuid, char* pending, std::size_t& n,
                                               std::size_t response_bytes) {
    v_ = std::make_unique<state>(uuid);
    v_->response_left = response_bytes;
    std::error_code ec;
    n = unpad(pending, n, ec);
    if (v_->facts.error.empty()) return std::nullopt;  // the log line's field: empty when none
    return v_->facts.error;
  }
  bool vision() const { return v_ != nullptr; }
  vision_facts vision_facts_now() const {
    if (!v_) return {};
    vision_facts f = v_->facts;
    f.padding_up = v_->up.padding_bytes();
    f.frames_up = v_->up.frames();
    f.padding_down = v_->down.padding_bytes();
    const auto& t = v_->down_tls;
    f.inner = t.tls13 ? "tls1.3" : t.tls12_or_above ? "tls1.2" : t.is_tls ? "tls" : "none";
    return f;
  }

  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    if (!v_) return tls_.read_now(data, size, ec);
    ec.clear();
    while (!v_->up_direct) {
      const std::size_t k = tls_.read_now(data, size, ec);
      if (k == 0) return 0;
      const std::size_t got = unpad(data, k, ec);
      if (ec || got > 0) return got;
    }
    return raw_read_now(data, size, ec);
  }

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    const asio::mutable_buffer b = first_buffer(buffers);
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b, started = false](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          if (!v_ || (v_->up_direct && v_->raw_pos == v_->raw_in.size())) {
            if (started) return self.complete(ec, n);
            started = true;
            if (!v_) return tls_.async_read_some(b, std::move(self));
            return tls_.next_layer().async_read_some(b, std::move(self));
          }
          // Padded, or bytes handed over at the switch: one read that never waits, and a wait
          // for the socket when it would block. Completions go through the executor (the
          // padded part is a few reads), so a reader that loops never nests on the stack.
          if (!ec) n = read_now(static_cast<char*>(b.data()), b.size(), ec);
          if (n == 0 && !ec) return tls_.socket().async_wait(tcp::socket::wait_read, std::move(self));
          asio::post(get_executor(), [s = std::move(self), ec, n]() mutable { s.complete(ec, n); });
        },
        token, tls_.socket());
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    const asio::const_buffer b = first_buffer(buffers);
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b, stage = 0](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          if (stage == 0) {
            if (!v_ || !v_->down.padding()) {
              stage = 1;
              // The downlink's detection goes on after its padding ended: the client's may too.
              if (v_ && v_->down_tls.filtering()) v_->down_tls.observe({static_cast<const char*>(b.data()), b.size()});
              if (v_ && v_->down_direct) return tls_.next_layer().async_write_some(b, std::move(self));
              return tls_.async_write_some(b, std::move(self));
            }
            stage = 2;
            pad_into_out(static_cast<const char*>(b.data()), b.size());
            return tls_.async_write_some(asio::buffer(v_->out), std::move(self));
          }
          if (stage == 1) return self.complete(ec, n);
          // stage 2: the padded form went (SSL_write writes all of it or fails).
          if (!ec && n < v_->out.size()) ec = asio::error::connection_aborted;
          v_->out.clear();
          if (!ec && v_->direct_next) {
            v_->down_direct = true;
            v_->facts.direct_down_us = since_accept();
          }
          self.complete(ec, ec ? 0 : b.size());
        },
        token, tls_.socket());
  }

  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this, started = false](auto& self, std::error_code ec = {}) mutable {
          if (started) return self.complete(ec);
          started = true;
          if (!v_ || !v_->up_direct) return tls_.async_wait_readable(std::move(self));
          if (v_->raw_pos < v_->raw_in.size())
            return asio::post(get_executor(), [s = std::move(self)]() mutable { s.complete(std::error_code{}); });
          tls_.socket().async_wait(tcp::socket::wait_read, std::move(self));
        },
        token, tls_.socket());
  }

  void release_read_ahead() {
    if (!v_ || !v_->up_direct) tls_.release_read_ahead();
  }

  // After direct copy either way the TLS session is over: a TCP half-close ends the stream.
  template <class Token>
  auto async_shutdown(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this, started = false](auto& self, std::error_code ec = {}) mutable {
          if (started) return self.complete(ec);
          started = true;
          if (!v_ || (!v_->up_direct && !v_->down_direct)) return tls_.async_shutdown(std::move(self));
          std::error_code ignored;
          tls_.socket().shutdown(tcp::socket::shutdown_send, ignored);
          asio::post(get_executor(), [s = std::move(self)]() mutable { s.complete(std::error_code{}); });
        },
        token, tls_.socket());
  }

 private:
  struct state {
    explicit state(const uuid_bytes& uuid) : up(uuid), down(uuid, std::random_device{}()) {}
    vision::unpadder up;
    vision::padder down;
    // Each direction its own detection: only the destination's ServerHello, going down, can
    // allow direct copy. The client's bytes say whether the stream is TLS (its ClientHello) and
    // count against the detection's packets (both directions count, as in Xray); a ServerHello
    // among them decides nothing.
    vision::tls_filter up_tls, down_tls;
    std::size_t response_left = 0;
    bool up_direct = false, down_direct = false, direct_next = false;
    std::string out;     // one write's padded form
    std::string raw_in;  // what the TLS held when the uplink went direct
    std::size_t raw_pos = 0;
    vision_facts facts;
  };

  template <class Buffers>
  static auto first_buffer(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it)
      if (it->size() > 0) return *it;
    return *asio::buffer_sequence_begin(buffers);
  }

  std::int64_t since_accept() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - accepted_).count();
  }

  // The uplink's bytes as read from the TLS, in place: the content among them (and, after the
  // direct command, the switch to the socket). A broken format is an error with its reason.
  std::size_t unpad(char* data, std::size_t n, std::error_code& ec) {
    std::size_t got = n;
    if (v_->up.padded()) {
      const auto r = v_->up.feed(data, n, data);
      if (!r.error.empty()) return fail(r.error, ec);
      got = r.out;
    }
    if (v_->down_tls.filtering() && got > 0) observe_up({data, got});
    if (v_->up.direct() && !v_->up_direct) {
      // Direct before the destination's TLS 1.3 ServerHello went down: nothing the raw bytes
      // could be (a ServerHello the client sent up itself does not count).
      if (!v_->down_tls.direct_ok) return fail("vision_direct_early", ec);
      tls_.hand_over(v_->raw_in);
      v_->up_direct = true;
      v_->facts.direct_up_us = since_accept();
    }
    return got;
  }

  void observe_up(std::string_view packet) {
    v_->up_tls.observe(packet);
    --v_->down_tls.packets_left;
    v_->down_tls.is_tls = v_->down_tls.is_tls || v_->up_tls.is_tls;
  }

  std::size_t fail(std::string_view why, std::error_code& ec) {
    v_->facts.error = why;
    ec = asio::error::invalid_argument;
    return 0;
  }

  std::size_t raw_read_now(char* data, std::size_t size, std::error_code& ec) {
    if (v_->raw_pos < v_->raw_in.size()) {
      const std::size_t k = std::min(size, v_->raw_in.size() - v_->raw_pos);
      std::memcpy(data, v_->raw_in.data() + v_->raw_pos, k);
      v_->raw_pos += k;
      if (v_->raw_pos == v_->raw_in.size()) {
        std::string().swap(v_->raw_in);
        v_->raw_pos = 0;
      }
      return k;
    }
    const int fd = tls_.socket().native_handle();
    ssize_t r;
    do r = ::recv(fd, data, size, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r > 0) {
      apply_after_read(fd, tls_.next_layer().policy());
      return static_cast<std::size_t>(r);
    }
    if (r == 0)
      ec = asio::error::eof;
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
      ec = {errno, asio::error::get_system_category()};
    return 0;
  }

  // The response header's bytes first, unpadded; the rest framed.
  void pad_into_out(const char* data, std::size_t size) {
    const std::size_t head = std::min(size, v_->response_left);
    v_->out.assign(data, head);
    v_->response_left -= head;
    v_->direct_next = false;
    if (size > head) v_->direct_next = v_->down.pad(v_->down_tls, {data + head, size - head}, v_->out).direct;
  }

  tls_stream tls_;
  std::unique_ptr<state> v_;
  std::chrono::steady_clock::time_point accepted_{};
};

static_assert(transport::client_transport<vision_stream>);

}  // namespace vlessbench
