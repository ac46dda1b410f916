#include "core/client/gun_client.hpp"
#include "core/net/h2_nv.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace vlessbench::gun {

using h2::nv;

struct h2_client::callbacks {
  static h2_client& self(void* user) { return *static_cast<h2_client*>(user); }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
    auto& c = self(user);
    if (frame->hd.stream_id != c.stream_) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status")
      c.status_ = v;
    else if (n == "grpc-status")
      c.grpc_status_ = v;
    else if (n == "grpc-message")
      c.grpc_message_ = v;
    return 0;
  }

  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto& c = self(user);
    if (frame->hd.stream_id != c.stream_) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && c.status_ != "200") c.fail(c.status_ + " " + c.grpc_message_);
    // The server's END_STREAM (after its trailers) ends the stream for us, whatever we still send.
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (end && (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)) {
      c.ended_ = true;
      if (!c.grpc_status_.empty() && c.grpc_status_ != "0")
        c.fail("grpc-status " + c.grpc_status_ + ": " + c.grpc_message_);
    }
    return 0;
  }

  static int data_chunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                        void* user) {
    auto& c = self(user);
    if (id != c.stream_ || !c.error_.empty()) return 0;
    const auto step = c.decoder_.decode(std::string_view(reinterpret_cast<const char*>(data), len), c.received_);
    if (!step.reason.empty()) c.fail("grpc framing: " + std::string(step.reason));
    return 0;
  }

  static int stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    auto& c = self(user);
    if (id != c.stream_) return 0;
    c.ended_ = true;
    if (code != NGHTTP2_NO_ERROR)
      c.fail(std::string("stream reset: ") + nghttp2_http2_strerror(code));
    else if (!c.grpc_status_.empty() && c.grpc_status_ != "0")
      c.fail("grpc-status " + c.grpc_status_ + ": " + c.grpc_message_);
    return 0;
  }

  static ssize_t read_data(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length, std::uint32_t*,
                           nghttp2_data_source*, void* user) {
    auto& c = self(user);
    if (c.pending_.empty()) return NGHTTP2_ERR_DEFERRED;
    const std::size_t n = std::min(length, c.pending_.size());
    std::copy_n(c.pending_.data(), n, buf);
    c.pending_.erase(0, n);
    return static_cast<ssize_t>(n);
  }
};

h2_client::h2_client(const request_target& target)
    : decoder_(target.multi ? message_kind::multi_hunk : message_kind::hunk, std::size_t{16} << 20),
      multi_(target.multi) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::runtime_error("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_header_callback(cbs, callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, callbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, callbacks::stream_close);
  const int rv = nghttp2_session_client_new(&session_, cbs, this);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(rv));
  // A window as large as a bulk download wants: the caller reads the socket
  // only when it reads.
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4u << 20}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20);
  const std::string path = "/" + target.service + (target.multi ? "/TunMulti" : "/Tun");
  const nghttp2_nv fields[] = {
      nv(":method", "POST"), nv(":scheme", target.tls ? "https" : "http"), nv(":authority", target.authority),
      nv(":path", path),     nv("content-type", "application/grpc"),       nv("te", "trailers")};
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_data;
  stream_ = nghttp2_submit_request(session_, nullptr, fields, std::size(fields), &provider, this);
  if (stream_ < 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(stream_));
}

h2_client::~h2_client() { nghttp2_session_del(session_); }

void h2_client::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
}

std::string h2_client::take_output() {
  std::string out;
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) fail(std::string("h2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n <= 0) return out;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool h2_client::feed(const char* data, std::size_t n) {
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
  if (rv < 0) fail(std::string("h2: ") + nghttp2_strerror(static_cast<int>(rv)));
  if (error_.empty() && nghttp2_session_want_read(session_) == 0 && !ended_)
    fail("h2: the server closed the connection");
  return error_.empty();
}

void h2_client::send(std::string_view data) {
  if (data.empty()) return;
  pending_ += multi_ ? encode_multi_hunk({data}) : encode_hunk(data);
  nghttp2_session_resume_data(session_, stream_);
}

}  // namespace vlessbench::gun
