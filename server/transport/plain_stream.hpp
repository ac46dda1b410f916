#pragma once
// Plain TCP beneath a WebSocket or HTTPUpgrade transport (`tls = false`): a CDN or reverse proxy
// in front terminates TLS. The same interface as tls_stream, so ws_stream and httpupgrade_stream
// take either; never a transport on its own (VLESS without TLS or an upgrade is not offered).
#include <cerrno>
#include <string_view>
#include <system_error>

#include <sys/socket.h>

#include "core/net/policy_stream.hpp"
#include "server/transport/transport.hpp"

namespace vlessbench {

class plain_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  static constexpr transport::abilities can{};  // the byte stream only

  explicit plain_stream(policy_stream next) : next_(std::move(next)) {
    std::error_code ignored;
    next_.socket().native_non_blocking(true, ignored);
  }

  executor_type get_executor() { return next_.get_executor(); }
  tcp::socket& socket() { return next_.socket(); }
  // open() cannot fail and the stream has no rules of its own: never a reason.
  static std::optional<std::string_view> failure() { return std::nullopt; }
  static transport::facts facts() { return {"tcp", "", "", "", ""}; }

  // Nothing to open: the connection is accepted.
  static awaitable<std::error_code> open(const transport::open_clock&) { co_return std::error_code{}; }

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return next_.async_read_some(buffers, std::forward<Token>(token));
  }
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return next_.async_write_some(buffers, std::forward<Token>(token));
  }
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return next_.socket().async_wait(tcp::socket::wait_read, std::forward<Token>(token));
  }

  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    ec.clear();
    const int fd = next_.socket().native_handle();
    ssize_t n;
    do n = ::recv(fd, data, size, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
      apply_after_read(fd, next_.policy());
      return static_cast<std::size_t>(n);
    }
    if (n == 0)
      ec = asio::error::eof;
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
      ec = {errno, asio::error::get_system_category()};
    return 0;
  }

  // Nothing is read ahead: the kernel keeps what the caller has not read.
  static void release_read_ahead() {}

  // TCP's orderly close: FIN.
  template <class Token>
  auto async_shutdown(Token&& token) {
    return asio::async_compose<Token, void(std::error_code)>(
        [this](auto& self) {
          std::error_code ec;
          next_.socket().shutdown(tcp::socket::shutdown_send, ec);
          asio::post(next_.get_executor(), [s = std::move(self), ec]() mutable { s.complete(ec); });
        },
        token, next_.socket());
  }

 private:
  policy_stream next_;
};

}  // namespace vlessbench
