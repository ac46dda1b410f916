#include "server/transport/grpc_h2.hpp"
#include "core/net/h2_nv.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

namespace vlessbench::grpc {

using h2::nv;

struct h2_server::callbacks {
  static h2_server& self(void* user) { return *static_cast<h2_server*>(user); }

  static int begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
      self(user).heads_[frame->hd.stream_id] = {};
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
    auto& s = self(user);
    const auto it = s.heads_.find(frame->hd.stream_id);
    if (it == s.heads_.end()) return 0;  // trailers from the client: nothing in them matters
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":method")
      it->second.method = v;
    else if (n == ":path")
      it->second.path = v;
    else if (n == "content-type")
      it->second.content_type = v;
    return 0;
  }

  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto& s = self(user);
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    // Go's HTTP/2 client (sing-mux's h2mux) closes every stream with RST_STREAM CANCEL: a reset of a stream
    // that has had DATA from us is such a close; the rapid reset (CVE-2023-44487) resets streams before
    // any answer, so only those are counted.
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      const auto st = s.find(frame->hd.stream_id);
      if (!st || st->sent == 0) s.on_client_reset();
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      s.on_request(frame->hd.stream_id, end_stream);
    } else if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end_stream) {
      if (auto st = s.find(frame->hd.stream_id)) {
        st->peer_ended = true;
        s.touch(st->id);
      }
    }
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                        std::size_t len, void* user) {
    auto& s = self(user);
    auto st = s.find(id);
    if (!st || !st->failure.empty() || st->ending) {
      nghttp2_session_consume(session, id,
                              len);  // nobody reads it: keep the connection's window open
      return 0;
    }
    st->raw_unconsumed += len;
    s.touch(id);
    if (s.kind_ == h2_streams::connect) {
      st->in.append(reinterpret_cast<const char*>(data), len);
      return 0;
    }
    const std::size_t before = st->in.size();
    const auto step = st->decoder.decode(std::string_view(reinterpret_cast<const char*>(data), len), st->in);
    if (!step.reason.empty()) st->failure = step.reason;
    // Framing bytes (prefix, tags) are no session's: their share of the window
    // comes back now.
    const std::size_t framing = len - (st->in.size() - before);
    if (step.reason.empty() && framing > 0) {
      st->raw_unconsumed -= framing;
      nghttp2_session_consume(session, id, framing);
    }
    return 0;
  }

  static int stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    auto& s = self(user);
    s.heads_.erase(id);
    if (auto it = s.streams_.find(id); it != s.streams_.end()) {
      it->second->closed = true;
      it->second->reset_code = code;
      s.buffered_out_ -= it->second->out.size();
      s.touch(id);
      // What the session has not taken yet no longer counts against the
      // connection's window.
      nghttp2_session_consume_connection(s.session_, std::exchange(it->second->raw_unconsumed, 0));
      s.streams_.erase(it);
    }
    return 0;
  }

  static int frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    // A session's response is complete (its trailers) while the client is still sending:
    // RST_STREAM NO_ERROR asks it to stop without an error (RFC 9113 §8.1), and closes the stream
    // (and its bridge) instead of leaving it half-open for as long as the connection lives. Not
    // after a refusal: curl 7.88 takes NO_ERROR resets for errors, and a refused stream holds
    // nothing but its slot of the concurrent streams.
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
        self(user).find(frame->hd.stream_id) &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
      self(user).note_failure(std::string("h2_goaway_sent: ") + nghttp2_http2_strerror(frame->goaway.error_code));
    return 0;
  }

  static int error(nghttp2_session*, int code, const char* msg, std::size_t len, void* user) {
    (void)code;
    self(user).note_failure("h2_protocol_error: " + std::string(msg, len));
    return 0;
  }

  static ssize_t read_data(nghttp2_session* session, std::int32_t id, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source*, void* user) {
    auto st = self(user).find(id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (!st->out.empty()) {
      const std::size_t n = std::min(length, st->out.size());
      std::copy_n(st->out.data(), n, buf);
      st->out.erase(0, n);
      st->sent += n;
      self(user).buffered_out_ -= n;
      return static_cast<ssize_t>(n);
    }
    if (!st->ending) return NGHTTP2_ERR_DEFERRED;
    if (self(user).kind_ == h2_streams::connect) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;  // END_STREAM on this DATA frame
      return 0;
    }
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    const std::string status = std::to_string(st->grpc_status);
    std::vector<nghttp2_nv> trailers{nv("grpc-status", status)};
    if (!st->grpc_message.empty()) trailers.push_back(nv("grpc-message", st->grpc_message));
    if (nghttp2_submit_trailer(session, id, trailers.data(), trailers.size()) != 0)
      *flags &= ~NGHTTP2_DATA_FLAG_NO_END_STREAM;
    return 0;
  }
};

h2_server::h2_server(std::string service_name, const h2_limits& limits, h2_streams kind)
    : service_name_(std::move(service_name)),
      limits_(limits),
      kind_(kind),
      reset_tokens_(limits.reset_burst),
      reset_refilled_(std::chrono::steady_clock::now()) {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_option* opt = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0)
    throw std::runtime_error("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, callbacks::begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, callbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, callbacks::stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, callbacks::frame_send);
  nghttp2_session_callbacks_set_error_callback2(cbs, callbacks::error);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  // A client that queues acks faster than we send them (a PING or SETTINGS
  // flood) is cut off.
  nghttp2_option_set_max_outbound_ack(opt, 128);
  nghttp2_option_set_max_settings(opt, 32);
  // nghttp2's own reset limit answers INTERNAL_ERROR: only a backstop behind on_client_reset(). It counts
  // every reset, closes included: h2mux's Go clients close each stream with one, so there it sits higher.
  const std::uint64_t backstop = kind_ == h2_streams::connect ? 20 : 4;
  nghttp2_option_set_stream_reset_rate_limit(opt, backstop * limits_.reset_burst, backstop * limits_.reset_rate);
  nghttp2_option_set_max_continuations(opt, 8);
  nghttp2_option_set_max_send_header_block_length(opt, 16 * 1024);
  const int rv = nghttp2_session_server_new2(&session_, cbs, this, opt);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_option_del(opt);
  if (rv != 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(rv));
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<std::int32_t>(limits_.connection_window));
}

h2_server::~h2_server() { nghttp2_session_del(session_); }

void h2_server::note_failure(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
}

void h2_server::on_client_reset() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - reset_refilled_).count();
  reset_refilled_ = now;
  reset_tokens_ = std::min<double>(limits_.reset_burst, reset_tokens_ + elapsed * limits_.reset_rate);
  if (reset_tokens_ >= 1) {
    reset_tokens_ -= 1;
    return;
  }
  // frame_send notes it as h2_goaway_sent: ENHANCE_YOUR_CALM once the GOAWAY is out.
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

std::shared_ptr<h2_stream> h2_server::find(std::int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void h2_server::on_request(std::int32_t id, bool end_stream) {
  const auto it = heads_.find(id);
  if (it == heads_.end()) return;
  const request_head head = std::move(it->second);
  heads_.erase(it);
  if (kind_ == h2_streams::connect) return on_connect(id, head.method, end_stream);
  const std::string base = "/" + service_name_ + "/";
  const std::string_view ct = head.content_type;
  // application/grpc, or application/grpc+proto etc. (PROTOCOL-HTTP2.md
  // Content-Type).
  const bool grpc_type =
      ct == "application/grpc" || ct.rfind("application/grpc+", 0) == 0 || ct.rfind("application/grpc;", 0) == 0;
  std::optional<h2_rejection> refused;
  std::string http_status = "404";
  if (head.path != base + "Tun" && head.path != base + "TunMulti") {
    refused = h2_rejection{id, "wrong_path", head.path};
  } else if (head.method != "POST") {
    refused = h2_rejection{id, "wrong_method", head.method};
    http_status = "405";
  } else if (!grpc_type) {
    refused = h2_rejection{id, "wrong_content_type", head.content_type};
    http_status = "415";
  }
  if (refused) {
    // Trailers-only: the HTTP status and a gRPC status in one HEADERS frame,
    // END_STREAM.
    const nghttp2_nv fields[] = {nv(":status", http_status), nv("content-type", "application/grpc"),
                                 nv("grpc-status", "12"), nv("grpc-message", refused->reason)};
    nghttp2_submit_response(session_, id, fields, std::size(fields), nullptr);
    rejected_.push_back(std::move(*refused));
    return;
  }
  auto st = std::make_shared<h2_stream>();
  st->id = id;
  st->kind = head.path.ends_with("/TunMulti") ? gun::message_kind::multi_hunk : gun::message_kind::hunk;
  st->decoder = gun::stream_decoder(st->kind, limits_.max_message);
  st->peer_ended = end_stream;
  const nghttp2_nv fields[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_data;
  nghttp2_submit_response(session_, id, fields, std::size(fields), &provider);
  streams_[id] = st;
  opened_.push_back(std::move(st));
}

bool h2_server::feed(const char* data, std::size_t n) {
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
  if (rv >= 0) return true;
  if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC)
    note_failure("h2_bad_preface");
  else if (rv == NGHTTP2_ERR_FLOODED)
    note_failure("h2_flood");
  else
    note_failure(std::string("h2_error: ") + nghttp2_strerror(static_cast<int>(rv)));
  return false;
}

std::string_view h2_server::next_output() {
  const std::uint8_t* data = nullptr;
  const ssize_t n = nghttp2_session_mem_send(session_, &data);
  if (n <= 0) {
    if (n < 0) note_failure(std::string("h2_error: ") + nghttp2_strerror(static_cast<int>(n)));
    return {};
  }
  return {reinterpret_cast<const char*>(data), static_cast<std::size_t>(n)};
}

bool h2_server::done() const {
  return nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0;
}

std::size_t h2_server::queued_frames() const { return nghttp2_session_get_outbound_queue_size(session_); }

std::vector<std::shared_ptr<h2_stream>> h2_server::take_opened() { return std::exchange(opened_, {}); }
std::vector<h2_rejection> h2_server::take_rejected() { return std::exchange(rejected_, {}); }

void h2_server::consume(h2_stream& s, std::size_t n) {
  s.in.erase(0, n);
  // Decoded bytes never outnumber the DATA bytes they came in; all of them back
  // once `in` is empty.
  const std::size_t k = s.in.empty() ? s.raw_unconsumed : std::min(n, s.raw_unconsumed);
  s.raw_unconsumed -= k;
  if (k > 0) nghttp2_session_consume(session_, s.id, k);
}

void h2_server::on_connect(std::int32_t id, const std::string& method, bool end_stream) {
  if (method != "CONNECT") {
    const nghttp2_nv fields[] = {nv(":status", "405")};
    nghttp2_submit_response(session_, id, fields, std::size(fields), nullptr);
    rejected_.push_back({id, "wrong_method", method});
    return;
  }
  auto st = std::make_shared<h2_stream>();
  st->id = id;
  st->peer_ended = end_stream;
  const nghttp2_nv fields[] = {nv(":status", "200")};
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_data;
  nghttp2_submit_response(session_, id, fields, std::size(fields), &provider);
  streams_[id] = st;
  opened_.push_back(std::move(st));
}

void h2_server::credit(h2_stream& s, std::size_t n) {
  const std::size_t k = std::min(n, s.raw_unconsumed);
  s.raw_unconsumed -= k;
  if (k > 0 && !s.closed) nghttp2_session_consume(session_, s.id, k);
}

void h2_server::send(h2_stream& s, const char* data, std::size_t n) {
  if (s.closed || s.ending) return;
  const std::size_t before = s.out.size();
  if (kind_ == h2_streams::grpc) {
    char head[gun::max_header_bytes];
    s.out.append(head, gun::encode_hunk_header(head, n));
  }
  s.out.append(data, n);
  buffered_out_ += s.out.size() - before;
  nghttp2_session_resume_data(session_, s.id);
}

void h2_server::finish(h2_stream& s, int grpc_status, std::string message) {
  if (s.closed || s.ending) return;
  s.ending = true;
  s.grpc_status = grpc_status;
  s.grpc_message = std::move(message);
  nghttp2_session_resume_data(session_, s.id);
}

void h2_server::reset(h2_stream& s) {
  if (s.closed) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
}

void h2_server::go_away() { nghttp2_submit_shutdown_notice(session_); }

}  // namespace vlessbench::grpc
