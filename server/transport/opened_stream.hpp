#pragma once
// A stream whose opening (the TLS handshake) is already done and whose first bytes may have been
// read, handed to the connection that serves what they chose: the XHTTP listener reads a
// connection's first bytes to learn whether it speaks HTTP/2 or HTTP/1.1, then gives the stream,
// with those bytes, to one of them. Its open() is a no-op, its reads return the bytes read
// before first; the rest forwards.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "server/transport/transport.hpp"

namespace vlessbench {

template <class Lower>
class opened_stream {
 public:
  using executor_type = typename Lower::executor_type;
  static constexpr transport::abilities can{};

  opened_stream(std::shared_ptr<Lower> lower, std::string first) : lower_(std::move(lower)), first_(std::move(first)) {}

  executor_type get_executor() { return lower_->get_executor(); }
  tcp::socket& socket() { return lower_->socket(); }
  std::optional<std::string_view> failure() const { return lower_->failure(); }
  transport::facts facts() const { return lower_->facts(); }
  static awaitable<std::error_code> open(const transport::open_clock&) { co_return std::error_code{}; }

  template <class B, class Token>
  auto async_read_some(const B& b, Token&& token) {
    return asio::async_compose<Token, void(std::error_code, std::size_t)>(
        [this, b, started = false](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          if (started) return self.complete(ec, n);
          started = true;
          if (first_.empty()) return lower_->async_read_some(b, std::move(self));
          const asio::mutable_buffer to = *asio::buffer_sequence_begin(b);
          n = std::min(to.size(), first_.size());
          std::memcpy(to.data(), first_.data(), n);
          first_.erase(0, n);
          asio::post(lower_->get_executor(), [s = std::move(self), n]() mutable { s.complete(std::error_code{}, n); });
        },
        token, lower_->socket());
  }
  // One read without waiting (the lower stream's read_now), the bytes read before first.
  std::size_t read_now(char* data, std::size_t size, std::error_code& ec) {
    if (first_.empty()) return lower_->read_now(data, size, ec);
    ec.clear();
    const std::size_t n = std::min(size, first_.size());
    std::memcpy(data, first_.data(), n);
    first_.erase(0, n);
    return n;
  }
  template <class B, class Token>
  auto async_write_some(const B& b, Token&& token) {
    return lower_->async_write_some(b, std::forward<Token>(token));
  }

 private:
  std::shared_ptr<Lower> lower_;
  std::string first_;  // read before the connection was chosen, not yet returned
};

}  // namespace vlessbench
