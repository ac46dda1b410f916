#include "core/client/vision_client.hpp"

#include <cerrno>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/rand.h>

namespace vlessbench::vless {

namespace {

std::uint64_t seed() {
  std::uint64_t s = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&s), sizeof s);
  return s;
}

}  // namespace

fd_tls::fd_tls(tcp::socket& socket, asio::ssl::context& ctx, const tls::client_options& opts) : socket_(socket) {
  ssl_ = SSL_new(ctx.native_handle());
  if (ssl_ == nullptr) throw std::runtime_error("fd_tls: out of memory");
  std::error_code ignored;
  socket_.native_non_blocking(true, ignored);
  SSL_set_fd(ssl_, socket_.native_handle());
  SSL_set_connect_state(ssl_);
  tls::prepare_client(ssl_, opts);
}

fd_tls::~fd_tls() { SSL_free(ssl_); }

std::error_code fd_tls::map_error(int ssl_error) const {
  if (ssl_error == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
  if (ssl_error == SSL_ERROR_SSL) return {static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()};
  if (ssl_error == SSL_ERROR_SYSCALL && errno != 0) return {errno, asio::error::get_system_category()};
  return asio::ssl::error::stream_truncated;  // EOF without close_notify
}

// op until it succeeds or fails for good, waiting for the socket in between.
template <class Op>
awaitable<std::error_code> fd_tls::run(Op op, int& result) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    result = op(ssl_);
    if (result > 0) co_return std::error_code{};
    const int err = SSL_get_error(ssl_, result);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) co_return map_error(err);
    auto [ec] = co_await socket_.async_wait(
        err == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write, as_tuple_awaitable);
    if (ec) co_return ec;
  }
}

awaitable<std::error_code> fd_tls::handshake() {
  int r = 0;
  co_return co_await run([](SSL* s) { return SSL_do_handshake(s); }, r);
}

awaitable<std::error_code> fd_tls::write(std::string_view data) {
  while (!data.empty()) {
    int r = 0;
    const int len = static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30));
    if (auto ec = co_await run([&](SSL* s) { return SSL_write(s, data.data(), len); }, r)) co_return ec;
    data.remove_prefix(static_cast<std::size_t>(r));
  }
  co_return std::error_code{};
}

awaitable<std::error_code> fd_tls::read_some(char* data, std::size_t size, std::size_t& n) {
  int r = 0;
  const int len = static_cast<int>(std::min<std::size_t>(size, 1 << 30));
  auto ec = co_await run([&](SSL* s) { return SSL_read(s, data, len); }, r);
  n = ec ? 0 : static_cast<std::size_t>(r);
  co_return ec;
}

std::string fd_tls::take_pending() {
  std::string out;
  char tmp[4096];
  while (SSL_pending(ssl_) > 0) {
    const int r = SSL_read(ssl_, tmp, sizeof tmp);
    if (r <= 0) break;
    out.append(tmp, static_cast<std::size_t>(r));
  }
  return out;
}

vision_client::vision_client(const uuid_bytes& uuid) : up(uuid, seed()), down(uuid) {}

}  // namespace vlessbench::vless
