#pragma once
// The TLS session an https:// target speaks inside a path's tunnel (direct TCP, CONNECT, SOCKS5
// or VLESS): a client SSL over memory BIOs, driven by the tunnel's own read and write, so every
// path wraps its byte stream the same way and the handshake is one measurable phase
// (inner_tls_ms). Builds against BoringSSL and OpenSSL 3 alike.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "core/net/tls.hpp"

namespace vlessbench::runner {

class inner_tls {
 public:
  // The tunnel's byte stream underneath: write all of data; read some into data (n > 0 on success).
  using raw_write = std::function<awaitable<std::error_code>(std::string_view data)>;
  using raw_read = std::function<awaitable<std::error_code>(char* data, std::size_t size, std::size_t& n)>;

  // Throws std::runtime_error when the SSL object cannot be made (out of memory).
  inner_tls(asio::ssl::context& ctx, const tls::client_options& opts, raw_write write, raw_read read);
  ~inner_tls();
  inner_tls(const inner_tls&) = delete;
  inner_tls& operator=(const inner_tls&) = delete;

  awaitable<std::error_code> handshake();
  awaitable<std::error_code> write(std::string_view data);
  // n > 0 on success; a close_notify is asio::error::eof.
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n);
  std::string last_error() const { return error_; }  // the TLS library's reason, when it gave one

 private:
  awaitable<std::error_code> flush();  // sends what the SSL object wrote into its output BIO
  awaitable<std::error_code> feed();   // reads from the tunnel into the input BIO
  std::error_code fail(int ssl_result);

  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;   // owned by ssl_
  BIO* out_ = nullptr;  // owned by ssl_
  raw_write write_;
  raw_read read_;
  std::unique_ptr<char[]> buf_;
  std::string error_;
};

}  // namespace vlessbench::runner
