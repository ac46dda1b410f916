#include "runner/inner_tls.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <stdexcept>

namespace vlessbench::runner {

namespace {
constexpr std::size_t buf_size = 64 * 1024;
}  // namespace

inner_tls::inner_tls(asio::ssl::context& ctx, const tls::client_options& opts, raw_write write, raw_read read)
    : write_(std::move(write)), read_(std::move(read)), buf_(std::make_unique<char[]>(buf_size)) {
  ssl_ = SSL_new(ctx.native_handle());
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  if (!ssl_ || !in_ || !out_) {
    if (in_) BIO_free(in_);
    if (out_) BIO_free(out_);
    if (ssl_) SSL_free(ssl_);
    throw std::runtime_error("inner TLS: out of memory");
  }
  SSL_set_bio(ssl_, in_, out_);
  SSL_set_connect_state(ssl_);
  tls::prepare_client(ssl_, opts);
}

inner_tls::~inner_tls() { SSL_free(ssl_); }

std::error_code inner_tls::fail(int ssl_result) {
  const int err = SSL_get_error(ssl_, ssl_result);
  if (err == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e != 0) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    error_ = text;
    return {static_cast<int>(e), asio::error::get_ssl_category()};
  }
  return asio::error::connection_aborted;
}

awaitable<std::error_code> inner_tls::flush() {
  while (BIO_ctrl_pending(out_) > 0) {
    const int n = BIO_read(out_, buf_.get(), static_cast<int>(buf_size));
    if (n <= 0) break;
    if (auto ec = co_await write_(std::string_view(buf_.get(), static_cast<std::size_t>(n)))) co_return ec;
  }
  co_return std::error_code{};
}

awaitable<std::error_code> inner_tls::feed() {
  std::size_t n = 0;
  if (auto ec = co_await read_(buf_.get(), buf_size, n)) co_return ec;
  if (BIO_write(in_, buf_.get(), static_cast<int>(n)) != static_cast<int>(n)) co_return asio::error::no_memory;
  co_return std::error_code{};
}

awaitable<std::error_code> inner_tls::handshake() {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    // The ClientHello, or the client's Finished: out before waiting for anything.
    if (auto ec = co_await flush()) co_return ec;
    if (r == 1) co_return std::error_code{};
    if (SSL_get_error(ssl_, r) != SSL_ERROR_WANT_READ) co_return fail(r);
    if (auto ec = co_await feed()) co_return ec;
  }
}

awaitable<std::error_code> inner_tls::write(std::string_view data) {
  while (!data.empty()) {
    ERR_clear_error();
    // A memory BIO takes everything: SSL_write never waits, it only encrypts into out_.
    const int chunk = static_cast<int>(std::min<std::size_t>(data.size(), 1 << 20));
    const int r = SSL_write(ssl_, data.data(), chunk);
    if (r <= 0) co_return fail(r);
    data.remove_prefix(static_cast<std::size_t>(r));
    if (auto ec = co_await flush()) co_return ec;
  }
  co_return std::error_code{};
}

awaitable<std::error_code> inner_tls::read_some(char* data, std::size_t size, std::size_t& n) {
  n = 0;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
    if (r > 0) {
      n = static_cast<std::size_t>(r);
      co_return std::error_code{};
    }
    const int err = SSL_get_error(ssl_, r);
    if (err != SSL_ERROR_WANT_READ) co_return fail(r);
    // TLS 1.3 may answer post-handshake messages (key update): send what it wrote.
    if (auto ec = co_await flush()) co_return ec;
    if (auto ec = co_await feed()) co_return ec;
  }
}

}  // namespace vlessbench::runner
