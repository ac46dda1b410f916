#pragma once
// A TCP socket that applies its listener's tcp_policy after every completed read. Placed under
// asio::ssl::stream it also covers the reads the TLS handshake makes, and the ACK for the client's
// Finished is the one that matters most for the delayed-ACK stall (DESIGN.md §1).
#include <memory>

#include "core/net/asio_compat.hpp"
#include "core/net/socket_policy.hpp"

namespace vlessbench {

class policy_stream {
 public:
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;
  using next_layer_type = tcp::socket;

  // policy points into a listener_runtime that outlives this stream (the session holds it).
  policy_stream(tcp::socket socket, const shared_tcp_policy* policy) : socket_(std::move(socket)), policy_(policy) {}

  executor_type get_executor() { return socket_.get_executor(); }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return socket_.lowest_layer(); }
  tcp::socket& socket() { return socket_; }
  tcp_policy policy() const { return policy_->load(); }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return asio::async_compose<ReadToken, void(std::error_code, std::size_t)>(
        [this, buffers, started = false](auto& self, std::error_code ec = {}, std::size_t n = 0) mutable {
          if (!started) {
            started = true;
            socket_.async_read_some(buffers, std::move(self));
            return;
          }
          if (!ec && socket_.is_open()) apply_after_read(socket_.native_handle(), policy());
          self.complete(ec, n);
        },
        token, socket_);
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return socket_.async_write_some(buffers, std::forward<WriteToken>(token));
  }

 private:
  tcp::socket socket_;
  const shared_tcp_policy* policy_;
};

}  // namespace vlessbench
