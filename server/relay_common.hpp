#pragma once
// What the VLESS session's TCP relay (server/vless_session.hpp) and UDP relay
// (server/udp_relay.hpp) share: buffer sizes, the write condition, what counts
// as an EOF.
#include <chrono>
#include <cstddef>
#include <limits>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "server/buffer_pool.hpp"

namespace vlessbench::vless_server::detail {

using std::chrono::microseconds;
// Relay buffers are pooled 256 KiB blocks, taken when a socket is readable and
// given back after the write, so an idle session holds none. One upstream read
// of up to 256 KiB becomes one SSL_write (sixteen full 16 KiB records); up to
// 256 KiB of client records go upstream in one write.
constexpr std::size_t relay_block = buffer_pool::block_size;
constexpr std::size_t tls_record = 16 * 1024;  // largest TLS plaintext record
constexpr std::size_t header_buffer = 2048;    // a valid VLESS request header is < 600 bytes
constexpr std::size_t header_room = 2;         // VLESS response header, sent with the first bytes
constexpr auto shutdown_grace = std::chrono::milliseconds(1000);

// asio::transfer_all caps every write_some at 64 KiB (asio's
// default_max_transfer_size), so one 256 KiB block left as four send() calls
// (or four SSL_write calls), each completion a trip through the scheduler and
// its epoll_wait. This condition hands over the whole remainder at once.
struct transfer_all_unchunked {
  std::size_t operator()(const std::error_code& ec, std::size_t) const {
    return ec ? 0 : std::numeric_limits<std::size_t>::max();
  }
};

inline bool is_eof(const std::error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

}  // namespace vlessbench::vless_server::detail
