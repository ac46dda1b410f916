#include "server/transport/xhttp_h2.hpp"
#include "core/net/h2_nv.hpp"
#include "server/transport/xhttp_h1.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <stdexcept>
#include <utility>

namespace vlessbench::xhttp {

using h2::nv;

grpc::h2_limits h2_limits_for(const transport_spec& t) {
  grpc::h2_limits l;
  // XMUX puts many sessions' streams on one connection: room for several windows held by slow
  // sessions, and for a packet's body.
  l.connection_window = std::max<std::uint32_t>(8u << 20, 2 * t.max_post_bytes);
  return l;
}

namespace {

std::string padding_value(const transport_spec& t) {
  static std::minstd_rand gen{std::random_device{}()};
  std::uniform_int_distribution<std::uint32_t> pick(t.padding_min, t.padding_max);
  return std::string(pick(gen), 'X');
}

}  // namespace

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
    if (it == s.heads_.end()) return 0;  // trailers: nothing in them matters
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    auto& head = it->second;
    if (n == ":method") {
      head.method = v;
    } else if (n == ":path") {
      head.path = v;
    } else if (n == ":authority" || (n == "host" && head.authority.empty())) {
      head.authority = v;
    } else if (n == "referer") {
      head.referer = v;
    } else if (n == "content-length") {
      std::uint64_t len = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), len);
      head.has_content_length = ec == std::errc{} && p == v.data() + v.size();
      head.content_length = len;
    }
    return 0;
  }

  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto& s = self(user);
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    // A reset before any answer of ours is what the rapid reset (CVE-2023-44487) sends; a
    // client's cancel of a stream it had answers on is an ordinary close.
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      const auto st = s.find(frame->hd.stream_id);
      if (!st || !st->answered) s.on_client_reset();
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      s.on_request(frame->hd.stream_id, end_stream);
    } else if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end_stream) {
      if (auto st = s.find(frame->hd.stream_id)) st->peer_ended = true;
    }
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                        std::size_t len, void* user) {
    auto& s = self(user);
    auto st = s.find(id);
    const bool packet = st && st->target.kind == request_kind::packet;
    const bool takes_body =
        st && !st->ending && !st->too_large &&
        (packet || st->target.kind == request_kind::stream_up || st->target.kind == request_kind::stream_one);
    if (!takes_body) {
      nghttp2_session_consume(session, id, len);  // nobody reads it: keep the connection's window open
      return 0;
    }
    if (packet && st->in.size() + len > s.t_.max_post_bytes) {
      st->too_large = true;
      nghttp2_session_consume(session, id, len + std::exchange(st->raw_unconsumed, 0));
      st->in.clear();
      return 0;
    }
    st->in.append(reinterpret_cast<const char*>(data), len);
    st->raw_unconsumed += len;
    return 0;
  }

  static int stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    auto& s = self(user);
    s.heads_.erase(id);
    if (auto it = s.streams_.find(id); it != s.streams_.end()) {
      it->second->closed = true;
      it->second->reset_code = code;
      s.buffered_out_ -= it->second->out.size();
      nghttp2_session_consume_connection(s.session_, std::exchange(it->second->raw_unconsumed, 0));
      s.streams_.erase(it);
    }
    return 0;
  }

  static int frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    // Our answer is complete while the client still sends (a session's end before its stream-one
    // body's): RST_STREAM NO_ERROR asks it to stop without an error (RFC 9113 §8.1).
    const bool ends = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) && ends &&
        self(user).find(frame->hd.stream_id) &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
      self(user).note_failure(std::string("h2_goaway_sent: ") + nghttp2_http2_strerror(frame->goaway.error_code));
    return 0;
  }

  static int error(nghttp2_session*, int, const char* msg, std::size_t len, void* user) {
    self(user).note_failure("h2_protocol_error: " + std::string(msg, len));
    return 0;
  }

  static ssize_t read_data(nghttp2_session*, std::int32_t id, std::uint8_t* buf, std::size_t length,
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
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
};

h2_server::h2_server(const transport_spec& t, const grpc::h2_limits& limits)
    : t_(t),
      path_(normalize_path(t.path)),
      limits_(limits),
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
  // The same bounds as the gRPC listener's (grpc_h2.cpp).
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, 128);
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_stream_reset_rate_limit(opt, 4 * limits_.reset_burst, 4 * limits_.reset_rate);
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
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

std::shared_ptr<h2_request> h2_server::find(std::int32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

void h2_server::refuse(std::int32_t id, std::string reason, std::string detail) {
  const std::string status = std::to_string(status_for(reason));
  const std::string pad = padding_value(t_);
  const nghttp2_nv fields[] = {nv(":status", status), nv("x-padding", pad)};
  nghttp2_submit_response(session_, id, fields, std::size(fields), nullptr);
  rejected_.push_back({id, std::move(reason), std::move(detail)});
}

void h2_server::on_request(std::int32_t id, bool end_stream) {
  const auto it = heads_.find(id);
  if (it == heads_.end()) return;
  const request_head head = std::move(it->second);
  heads_.erase(it);
  const std::string what = head.method + " " + head.path.substr(0, 120);
  if (!t_.host.empty() && !host_matches(head.authority, t_.host)) return refuse(id, "wrong_host", head.authority);
  const rules r{path_, t_.xhttp_mode, t_.padding_min, t_.padding_max};
  std::optional<std::string_view> referer;
  if (!head.referer.empty()) referer = head.referer;
  auto c = classify(head.method, head.path, referer, r);
  if (c.invalid()) return refuse(id, std::string(c.reason), what);
  if (c.value.kind == request_kind::packet && head.has_content_length && head.content_length > t_.max_post_bytes)
    return refuse(id, "xhttp_post_too_large", what + ": " + std::to_string(head.content_length) + " bytes");
  auto st = std::make_shared<h2_request>();
  st->id = id;
  st->target = std::move(c.value);
  st->peer_ended = end_stream;
  // A packet's body is taken whole before it is answered: its window holds all of it.
  if (st->target.kind == request_kind::packet && t_.max_post_bytes > limits_.stream_window)
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, id,
                                          static_cast<std::int32_t>(t_.max_post_bytes));
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

void h2_server::answer_stream(h2_request& r, bool event_stream) {
  if (r.closed || r.answered) return;
  r.answered = true;
  const std::string pad = padding_value(t_);
  std::vector<nghttp2_nv> fields{nv(":status", "200"), nv("x-accel-buffering", "no"), nv("cache-control", "no-store")};
  if (event_stream) fields.push_back(nv("content-type", "text/event-stream"));
  fields.push_back(nv("x-padding", pad));
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_data;
  nghttp2_submit_response(session_, r.id, fields.data(), fields.size(), &provider);
}

void h2_server::answer(h2_request& r, int status) {
  if (r.closed || r.answered) return;
  r.answered = true;
  r.ending = true;
  const std::string code = std::to_string(status);
  const std::string pad = padding_value(t_);
  const nghttp2_nv fields[] = {nv(":status", code), nv("x-padding", pad)};
  nghttp2_submit_response(session_, r.id, fields, std::size(fields), nullptr);
}

void h2_server::consume(h2_request& r, std::size_t n) {
  r.in.erase(0, n);
  const std::size_t k = std::min(n, r.raw_unconsumed);
  r.raw_unconsumed -= k;
  if (k > 0 && !r.closed) nghttp2_session_consume(session_, r.id, k);
}

void h2_server::send(h2_request& r, const char* data, std::size_t n) {
  if (r.closed || r.ending) return;
  r.out.append(data, n);
  buffered_out_ += n;
  nghttp2_session_resume_data(session_, r.id);
}

void h2_server::finish(h2_request& r) {
  if (r.closed || r.ending) return;
  r.ending = true;
  nghttp2_session_resume_data(session_, r.id);
}

void h2_server::reset(h2_request& r) {
  if (r.closed) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, r.id, NGHTTP2_CANCEL);
}

void h2_server::go_away() { nghttp2_submit_shutdown_notice(session_); }

}  // namespace vlessbench::xhttp
