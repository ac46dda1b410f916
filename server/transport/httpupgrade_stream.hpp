#pragma once
// HTTPUpgrade (transport = "httpupgrade"): a WebSocket-style upgrade request, a 101, then the raw
// VLESS stream with no framing. The client may send its first VLESS bytes right behind the
// request, before it reads the 101: they are the stream's first bytes (its early data).
// Over TLS (Lower = tls_stream) or plain TCP (plain_stream).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "server/transport/upgrade.hpp"

namespace vlessbench {

template <class Lower>
class httpupgrade_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  // No half-close to tell the client of the destination's EOF: the session waits for the client
  // to close first (server/vless_session.hpp, [limits] close_linger_ms).
  static constexpr transport::abilities can{.lingers_after_upstream_eof = true};

  template <class... Args>
  explicit httpupgrade_stream(transport_spec t, Args&&... lower)
      : t_(std::move(t)), lower_(std::forward<Args>(lower)...) {}
  httpupgrade_stream(const httpupgrade_stream&) = delete;
  httpupgrade_stream& operator=(const httpupgrade_stream&) = delete;

  executor_type get_executor() { return lower_.get_executor(); }
  tcp::socket& socket() { return lower_.socket(); }
  std::optional<std::string_view> failure() const {
    if (!failure_) return std::nullopt;
    return *failure_;
  }
  transport::facts facts() const {
    transport::facts f = lower_.facts();
    f.transport = to_string(transport_kind::httpupgrade);
    f.early_data = early_bytes_;
    return f;
  }

  awaitable<std::error_code> open(const transport::open_clock& clock) {
    transport::upgrade_outcome out;
    if (auto ec = co_await transport::open_upgraded(lower_, t_, clock, out)) {
      failure_ = out.reason;
      co_return ec;
    }
    pending_ = std::move(out.rest);
    early_bytes_ = pending_.size();
    co_return std::error_code{};
  }

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    if (pending_.empty()) return lower_.async_read_some(buffers, std::forward<Token>(token));
    const asio::mutable_buffer b = *asio::buffer_sequence_begin(buffers);
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b](auto& self) {
          const std::size_t n = take_pending(static_cast<char*>(b.data()), b.size());
          asio::post(lower_.get_executor(), [s = std::move(self), n]() mutable { s.complete(std::error_code{}, n); });
        },
        token, lower_.socket());
  }
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return lower_.async_write_some(buffers, std::forward<Token>(token));
  }
  template <class Token>
  auto async_wait_readable(Token&& token) {
    if (pending_.empty()) return lower_.async_wait_readable(std::forward<Token>(token));
    return asio::async_compose<Token, void(std::error_code)>(
        [this](auto& self) {
          asio::post(lower_.get_executor(), [s = std::move(self)]() mutable { s.complete(std::error_code{}); });
        },
        token, lower_.socket());
  }
  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    ec.clear();
    if (!pending_.empty()) return take_pending(data, size);
    return lower_.read_now(data, size, ec);
  }
  void release_read_ahead() { lower_.release_read_ahead(); }
  template <class Token>
  auto async_shutdown(Token&& token) {
    return lower_.async_shutdown(std::forward<Token>(token));
  }

 private:
  std::size_t take_pending(char* data, std::size_t size) {
    const std::size_t n = std::min(size, pending_.size());
    std::memcpy(data, pending_.data(), n);
    pending_.erase(0, n);
    if (pending_.empty()) std::string().swap(pending_);
    return n;
  }

  transport_spec t_;
  Lower lower_;
  std::optional<std::string> failure_;
  std::string pending_;  // stream bytes that came with the upgrade request
  std::size_t early_bytes_ = 0;
};

}  // namespace vlessbench
