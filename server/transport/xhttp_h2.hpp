#pragma once
// The XHTTP listener's HTTP/2 side (transport = "xhttp" over TLS with ALPN h2, or h2c on a plain
// listener), over bytes: an nghttp2 server session fed what the connection reads and drained of
// what it must write (no sockets here; xhttp_h2_connection.hpp does the I/O). Each request stream
// is one XHTTP request, classified as the HTTP/1.1 path classifies it (core/wire/xhttp_request.hpp):
//   GET <path><session> (download), POST <path> (stream-one): answered 200 with the downlink
//     headers (X-Accel-Buffering: no, Cache-Control: no-store, Content-Type: text/event-stream,
//     X-Padding), the body streamed from `out` until finish();
//   POST <path><session> (stream-up): 200 at once, the request body is the uplink;
//   POST <path><session>/<seq> (packet-up): the body (at most max_post_bytes) is read whole, then
//     answered with a short 200 (answer()).
// A request refused is answered at once with the status the HTTP/1.1 path gives the same reason
// (404 path or host, 405 method, 400 padding, session or seq, 413 too large) and reported.
//
// Bounds are grpc_h2's (its h2_limits and the same nghttp2 options): SETTINGS_MAX_CONCURRENT_STREAMS
// and MAX_HEADER_LIST_SIZE sent and enforced, PING/SETTINGS ack floods and CONTINUATION floods end
// the connection, a client RST_STREAM rate over reset_rate ends it with GOAWAY ENHANCE_YOUR_CALM.
// Inbound flow control is manual: a stream's window opens only as its bytes are taken (consume()),
// so a slow session holds at most its stream's window and never stalls the others on the
// connection until connection_window is full of such windows. A packet's stream window is raised
// to max_post_bytes (its body is taken whole); the connection window bounds what all of them hold.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wire/transport_spec.hpp"
#include "core/wire/xhttp_request.hpp"
#include "server/transport/grpc_h2.hpp"

struct nghttp2_session;

namespace vlessbench::xhttp {

// An XHTTP listener's HTTP/2 bounds: gRPC's, with a wider connection window (several sessions'
// streams share one connection under XMUX).
grpc::h2_limits h2_limits_for(const transport_spec& t);

// One request stream's state, shared between the connection's handlers and the driver.
struct h2_request {
  std::int32_t id = 0;
  request_target target;
  std::string in;                  // request body bytes not yet taken
  std::size_t raw_unconsumed = 0;  // of them, not yet given back to the windows
  std::string out;                 // response body bytes to send
  std::uint64_t sent = 0;          // bytes of `out` handed to DATA frames
  bool peer_ended = false;         // the client's END_STREAM
  bool ending = false;             // ours: END_STREAM once `out` is sent
  bool answered = false;           // response headers submitted
  bool closed = false;             // nghttp2 closed the stream (either side, or a reset)
  bool too_large = false;          // a packet's body went past max_post_bytes
  std::uint32_t reset_code = 0;    // the close's HTTP/2 error code (0: orderly)
};

struct h2_rejection {
  std::int32_t id = 0;
  std::string reason;  // classify()'s reasons, wrong_host, bad_request
  std::string detail;
};

class h2_server {
 public:
  h2_server(const transport_spec& t, const grpc::h2_limits& limits);
  ~h2_server();
  h2_server(const h2_server&) = delete;
  h2_server& operator=(const h2_server&) = delete;

  // Feeds bytes read from the client. False: the connection must end after the output is
  // flushed (failure() says why: h2_bad_preface, h2_flood, h2_protocol_error: ...).
  bool feed(const char* data, std::size_t n);
  // The next bytes to write, empty when there are none; valid until the next call.
  std::string_view next_output();
  bool done() const;
  const std::string& failure() const { return failure_; }

  // Requests accepted (classified) and refused since the last call.
  std::vector<std::shared_ptr<h2_request>> take_opened() { return std::exchange(opened_, {}); }
  std::vector<h2_rejection> take_rejected() { return std::exchange(rejected_, {}); }
  std::size_t open_streams() const { return streams_.size(); }

  // A streaming answer: 200 with the downlink headers (event_stream: the Content-Type too), its
  // body what send() gives until finish().
  void answer_stream(h2_request& r, bool event_stream);
  // A short answer without a body (a packet's 200, or a refusal's status).
  void answer(h2_request& r, int status);
  // The reader took n bytes out of r.in: the windows open by as much.
  void consume(h2_request& r, std::size_t n);
  void send(h2_request& r, const char* data, std::size_t n);
  void finish(h2_request& r);
  void reset(h2_request& r);  // RST_STREAM CANCEL
  void go_away();
  // Bytes waiting in the streams' `out` for the client's windows.
  std::size_t buffered_out() const { return buffered_out_; }

 private:
  struct callbacks;
  std::shared_ptr<h2_request> find(std::int32_t id) const;
  void on_request(std::int32_t id, bool end_stream);
  void refuse(std::int32_t id, std::string reason, std::string detail);
  void note_failure(std::string why);
  void on_client_reset();

  nghttp2_session* session_ = nullptr;
  transport_spec t_;
  std::string path_;
  grpc::h2_limits limits_;
  std::map<std::int32_t, std::shared_ptr<h2_request>> streams_;
  struct request_head {
    std::string method, path, authority, referer;
    bool has_content_length = false;
    std::uint64_t content_length = 0;
  };
  std::map<std::int32_t, request_head> heads_;
  std::vector<std::shared_ptr<h2_request>> opened_;
  std::vector<h2_rejection> rejected_;
  std::string failure_;
  std::size_t buffered_out_ = 0;
  double reset_tokens_ = 0;
  std::chrono::steady_clock::time_point reset_refilled_;
};

}  // namespace vlessbench::xhttp
