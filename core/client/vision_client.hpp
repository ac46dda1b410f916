#pragma once
// The client half of XTLS Vision (flow=xtls-rprx-vision in a link; docs/runner.md "Vision"), for
// the one VLESS client (core/client/vless_client.hpp): TLS run straight on the socket's
// descriptor, and the padding of both directions (core/wire/vision.hpp).
//
// Why its own TLS: asio::ssl::stream reads the socket ahead into buffers of its own, so at the
// switch to direct copy the raw bytes the server sent after its last padded record could be
// stuck inside it. BoringSSL and OpenSSL, reading a socket themselves, take a record's header
// and then its body and nothing more: what follows the last record is still in the socket.
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "core/net/tls.hpp"
#include "core/wire/vision.hpp"

namespace vlessbench::vless {

class fd_tls {
 public:
  fd_tls(tcp::socket& socket, asio::ssl::context& ctx, const tls::client_options& opts);
  ~fd_tls();
  fd_tls(const fd_tls&) = delete;
  fd_tls& operator=(const fd_tls&) = delete;

  awaitable<std::error_code> handshake();
  awaitable<std::error_code> write(std::string_view data);
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n);
  // The plaintext of a record read only in part: handed over at the switch; no read follows.
  std::string take_pending();
  SSL* native_handle() { return ssl_; }

 private:
  template <class Op>
  awaitable<std::error_code> run(Op op, int& result);
  std::error_code map_error(int ssl_error) const;

  tcp::socket& socket_;
  SSL* ssl_ = nullptr;
};

// One connection's Vision: the padding of our writes, the unpadding of the server's, and which
// direction has gone beneath the TLS.
struct vision_client {
  explicit vision_client(const uuid_bytes& uuid);
  vision::tls_filter filter;
  vision::padder up;
  vision::unpadder down;
  bool up_direct = false;    // our writes go to the socket
  bool down_direct = false;  // the server's bytes come from the socket
  std::string_view error;    // the server's padding broke the format
};

}  // namespace vlessbench::vless
