#pragma once
// The gRPC listener's HTTP/2 server side (transport = "grpc"), over bytes: an
// nghttp2 server session fed what the connection reads and drained of what it
// must write (no sockets here; server/transport/grpc_connection.hpp does the
// I/O). Each request stream
//   POST /<service_name>/Tun (or /TunMulti), content-type application/grpc...
// is accepted with :status 200 and content-type application/grpc, and carries
// one VLESS session: client DATA is decoded (core/wire/gun_codec.hpp) into the
// stream's `in`, what the session writes is framed as Hunk messages into `out`;
// the end is trailers grpc-status: 0 (or 13 with grpc-message after a
// violation). Any other request is answered at once with an HTTP error and a
// trailers-only gRPC status (404 + grpc-status 12 for another path, 405 for
// another method, 415 for another content type) and reported as a rejection
// with its reason.
//
// Bounds: SETTINGS_MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE are sent and
// enforced by nghttp2; inbound flow control is manual (no automatic
// WINDOW_UPDATE): a stream's window opens again only as its session takes the
// decoded bytes (consume()), so a slow session holds at most one stream window,
// and all of a connection's streams at most the connection window. Outbound,
// the connection stops reading a session while its stream's `out` is above
// out_limit. Floods (PING/SETTINGS acks queued, CONTINUATION frames) end the
// connection through nghttp2's own limits, a RST_STREAM rate over reset_rate
// through ours (GOAWAY ENHANCE_YOUR_CALM, where nghttp2's own says
// INTERNAL_ERROR); failure() names why.
//
// The same driver serves sing-mux's h2mux (h2_streams::connect; docs/sessions.md
// "sing-mux"): there a stream is a CONNECT request (any :authority), answered
// :status 200, its DATA raw bytes both ways (no gun framing), its end an
// END_STREAM after `out` (no trailers); any other method is answered 405 and
// rejected as wrong_method.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wire/gun_codec.hpp"

struct nghttp2_session;

namespace vlessbench::grpc {

struct h2_limits {
  std::uint32_t max_streams = 100;             // SETTINGS_MAX_CONCURRENT_STREAMS
  std::uint32_t stream_window = 256 * 1024;    // SETTINGS_INITIAL_WINDOW_SIZE
  std::uint32_t connection_window = 1u << 20;  // stream 0's receive window
  std::uint32_t max_header_list = 16 * 1024;   // SETTINGS_MAX_HEADER_LIST_SIZE
  std::size_t out_limit = 64 * 1024;           // framed bytes a stream may hold to send
  std::size_t max_message = gun::default_max_message;
  // Client RST_STREAMs (the "rapid reset" of CVE-2023-44487): a burst, then a rate per second;
  // beyond it GOAWAY ENHANCE_YOUR_CALM (RFC 9113 §5.4.1) ends the connection.
  std::uint32_t reset_burst = 200;
  std::uint32_t reset_rate = 50;
};

// What a request stream carries: a gRPC tunnel (gun framing, trailers) or an
// h2mux CONNECT stream (raw bytes, END_STREAM).
enum class h2_streams { grpc, connect };

// One request stream's state, shared between the session above and the
// connection's bridge.
struct h2_stream {
  std::int32_t id = 0;
  gun::message_kind kind = gun::message_kind::hunk;
  gun::stream_decoder decoder{gun::message_kind::hunk};
  std::string in;                  // decoded VLESS bytes for the session (connect: the raw DATA)
  std::size_t raw_unconsumed = 0;  // DATA bytes received and not yet given back to the window
  std::string out;                 // Hunk messages to send
  std::uint64_t sent = 0;          // bytes of `out` handed to DATA frames (the client's window let them)
  bool peer_ended = false;         // the client's END_STREAM
  bool ending = false;             // ours: trailers once `out` is sent
  bool closed = false;             // nghttp2 closed the stream (either side, or a reset)
  std::uint32_t reset_code = 0;    // the close's HTTP/2 error code (0: orderly)
  std::string failure;             // a gun framing violation from the client
  int grpc_status = 0;             // the trailers' grpc-status, and grpc-message when not empty
  std::string grpc_message;
};

// A stream answered with an error instead of being accepted.
struct h2_rejection {
  std::int32_t id = 0;
  std::string reason;  // wrong_path, wrong_method, wrong_content_type
  std::string detail;  // what came instead
};

class h2_server {
 public:
  h2_server(std::string service_name, const h2_limits& limits, h2_streams kind = h2_streams::grpc);
  ~h2_server();
  h2_server(const h2_server&) = delete;
  h2_server& operator=(const h2_server&) = delete;

  // Feeds bytes read from the client. False: the connection must end after the
  // output is flushed (failure() says why: h2_bad_preface, h2_flood,
  // h2_protocol_error: ...).
  bool feed(const char* data, std::size_t n);
  // The next bytes to write, empty when there are none; valid until the next
  // call.
  std::string_view next_output();
  // nghttp2 wants neither to read nor to write: the connection is over (GOAWAY
  // both ways, or an error).
  bool done() const;
  std::size_t queued_frames() const;
  const std::string& failure() const { return failure_; }

  // Streams accepted and rejections made since the last call.
  std::vector<std::shared_ptr<h2_stream>> take_opened();
  std::vector<h2_rejection> take_rejected();
  std::size_t open_streams() const { return streams_.size(); }

  // The session took n decoded bytes out of s.in: the window opens by what they
  // came in.
  void consume(h2_stream& s, std::size_t n);
  // The window opens by n DATA bytes of s that its reader took out of s.in
  // itself (connect streams, whose `in` is raw).
  void credit(h2_stream& s, std::size_t n);
  // Streams whose state changed (data, end, close) since the last call; an id
  // may repeat. CONNECT mode only (empty for gRPC).
  std::vector<std::int32_t> take_touched() { return std::exchange(touched_, {}); }
  // Bytes in the streams' `out` not yet handed to DATA frames (waiting for the
  // client's windows).
  std::size_t buffered_out() const { return buffered_out_; }
  // Frames data as one Hunk (connect: as it is) into s.out and wakes the
  // stream's DATA.
  void send(h2_stream& s, const char* data, std::size_t n);
  // Ends the stream after s.out: trailers grpc-status (0 orderly; otherwise
  // with message); connect streams: END_STREAM, the status unused.
  void finish(h2_stream& s, int grpc_status, std::string message);
  // Resets the stream (RST_STREAM CANCEL): the session went away without an
  // orderly end.
  void reset(h2_stream& s);
  // Sends GOAWAY (graceful: streams in progress finish), e.g. on a drain or an
  // idle connection.
  void go_away();

 private:
  struct callbacks;
  std::shared_ptr<h2_stream> find(std::int32_t id) const;
  void on_request(std::int32_t id, bool end_stream);
  void on_connect(std::int32_t id, const std::string& method, bool end_stream);
  void note_failure(std::string why);
  // Only CONNECT mode's reader takes them (grpc_connection looks at its streams itself): gRPC keeps none.
  void touch(std::int32_t id) {
    if (kind_ == h2_streams::connect) touched_.push_back(id);
  }
  void on_client_reset();

  nghttp2_session* session_ = nullptr;
  std::string service_name_;
  h2_limits limits_;
  h2_streams kind_;
  std::map<std::int32_t, std::shared_ptr<h2_stream>> streams_;  // accepted, not yet closed
  struct request_head {
    std::string method, path, content_type;
  };
  std::map<std::int32_t, request_head> heads_;  // requests whose headers are still arriving
  std::vector<std::shared_ptr<h2_stream>> opened_;
  std::vector<h2_rejection> rejected_;
  std::string failure_;
  std::vector<std::int32_t> touched_;
  std::size_t buffered_out_ = 0;
  double reset_tokens_ = 0;  // client resets left in the bucket
  std::chrono::steady_clock::time_point reset_refilled_;
};

}  // namespace vlessbench::grpc
