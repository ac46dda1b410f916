#pragma once
// The client half of the gRPC ("gun") transport, over bytes: an nghttp2 client
// session with one request stream, POST /<service>/Tun (or /TunMulti), whose
// DATA carries the VLESS stream as Hunk messages (core/wire/gun_codec.hpp). The one
// VLESS client (core/client/vless_client.hpp) does the I/O: it writes take_output()
// and feeds what it reads. The connection preface, SETTINGS and the request's
// HEADERS are ready at construction, so they leave with the first write: a new
// connection costs TCP + TLS + nothing more before the VLESS header, as Xray's
// and sing-box's gun clients do. Builds against either TLS library (no TLS
// here).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/gun_codec.hpp"

struct nghttp2_session;

namespace vlessbench::gun {

struct request_target {
  std::string authority;  // :authority (the server name or address)
  std::string service;    // the service name: the path is /<service>/Tun
  bool tls = true;        // :scheme https or http (h2c)
  bool multi = false;     // TunMulti (MultiHunk messages) instead of Tun
};

class h2_client {
 public:
  explicit h2_client(const request_target& target);
  ~h2_client();
  h2_client(const h2_client&) = delete;
  h2_client& operator=(const h2_client&) = delete;

  // Everything nghttp2 has to send now, in one buffer (empty: nothing).
  std::string take_output();
  // Feeds bytes read from the server; false once the stream or connection
  // failed (error()).
  bool feed(const char* data, std::size_t n);
  // Queues data as one message of the stream.
  void send(std::string_view data);
  // Queued DATA waits for the server's flow-control window (read, then write
  // again).
  bool send_blocked() const { return !pending_.empty(); }
  // Decoded VLESS bytes received; the caller takes them from the front.
  std::string& received() { return received_; }
  // The stream is over: orderly (grpc-status 0) when error() is empty.
  bool ended() const { return ended_; }
  // Why the stream failed: "404 wrong_path", "grpc-status 13: ...", "stream
  // reset: ...".
  const std::string& error() const { return error_; }

 private:
  struct callbacks;
  void fail(std::string why);

  nghttp2_session* session_ = nullptr;
  std::int32_t stream_ = -1;
  stream_decoder decoder_;
  bool multi_ = false;
  std::string pending_;  // framed messages not yet handed to nghttp2
  std::string received_;
  std::string status_;  // :status of the response
  std::string grpc_status_, grpc_message_;
  bool ended_ = false;
  std::string error_;
};

}  // namespace vlessbench::gun
