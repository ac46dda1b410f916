#include "core/client/xhttp_client.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <stdexcept>

#include "core/net/h2_nv.hpp"

// XHTTP's requests over HTTP/2 as bytes (h2_session); the I/O is in xhttp_client.cpp.
namespace vlessbench::xhttp {

using h2::nv;

struct h2_session::callbacks {
  static h2_session& self(void* user) { return *static_cast<h2_session*>(user); }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    if (n == ":status") self(user).status_[frame->hd.stream_id].assign(reinterpret_cast<const char*>(value), valuelen);
    return 0;
  }

  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto& c = self(user);
    const auto id = frame->hd.stream_id;
    const bool ours = c.streams_.count(id) > 0;
    if (ours && frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE &&
        c.status_[id] != "200")
      c.fail(c.status_[id] + (id == c.down_ ? " (downlink)" : " (uplink)"));
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (end && id == c.down_) c.ended_ = true;
    return 0;
  }

  static int data_chunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                        void* user) {
    auto& c = self(user);
    if (id == c.down_) c.received_.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    auto& c = self(user);
    const bool ours = c.streams_.erase(id) > 0;
    if (code != NGHTTP2_NO_ERROR && ours) c.fail(std::string("stream reset: ") + nghttp2_http2_strerror(code));
    if (id == c.down_) c.ended_ = true;
    c.status_.erase(id);
    c.posts_.erase(id);
    return 0;
  }

  static ssize_t read_data(nghttp2_session*, std::int32_t id, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source*, void* user) {
    auto& c = self(user);
    if (id == c.up_) {
      if (c.up_pending_.empty()) return NGHTTP2_ERR_DEFERRED;
      const std::size_t n = std::min(length, c.up_pending_.size());
      std::copy_n(c.up_pending_.data(), n, buf);
      c.up_pending_.erase(0, n);
      return static_cast<ssize_t>(n);
    }
    const auto it = c.posts_.find(id);
    if (it == c.posts_.end()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    const std::size_t n = std::min(length, it->second.size());
    std::copy_n(it->second.data(), n, buf);
    it->second.erase(0, n);
    if (it->second.empty()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      c.posts_.erase(it);
    }
    return static_cast<ssize_t>(n);
  }
};

h2_session::h2_session(const client_settings& s) : s_(s) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::runtime_error("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_header_callback(cbs, callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, callbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, callbacks::stream_close);
  const int rv = nghttp2_session_client_new(&session_, cbs, this);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(rv));
  // A window as large as a bulk download wants: the caller reads the socket only when it reads.
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4u << 20}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20);
}

h2_session::~h2_session() { nghttp2_session_del(session_); }

void h2_session::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
}

std::int32_t h2_session::submit(std::string_view method, const std::string& path, bool body,
                                std::size_t content_length) {
  const std::string ref = referer(s_, path, random_padding_length(s_));
  const std::string length = std::to_string(content_length);
  nghttp2_nv fields[6] = {nv(":method", method), nv(":scheme", s_.tls ? "https" : "http"),
                          nv(":authority", s_.authority), nv(":path", path), nv("referer", ref)};
  std::size_t count = 5;
  if (body && content_length > 0) {
    fields[count++] = nv("content-length", length);
  } else if (body) {
    fields[count++] = nv("content-type", "application/grpc");  // a streaming body, as Xray's client says
  }
  nghttp2_data_provider provider{};
  provider.read_callback = callbacks::read_data;
  const auto id = nghttp2_submit_request(session_, nullptr, fields, count, body ? &provider : nullptr, this);
  if (id < 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(id));
  streams_.insert(id);
  return id;
}

void h2_session::open(std::string_view session) {
  if (down_ >= 0) end_session();
  if (session.empty()) {
    down_ = up_ = submit("POST", request_path(s_), true, 0);
    return;
  }
  down_ = submit("GET", request_path(s_, session), false, 0);
  if (s_.speaks == mode::stream_up) up_ = submit("POST", request_path(s_, session), true, 0);
}

void h2_session::end_session() {
  for (const auto id : streams_)
    if (nghttp2_session_find_stream(session_, id) != nullptr)
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  streams_.clear();
  posts_.clear();
  down_ = up_ = -1;
  up_pending_.clear();
  received_.clear();
  ended_ = false;
}

void h2_session::send(std::string_view data) {
  if (data.empty() || up_ < 0) return;
  up_pending_ += data;
  nghttp2_session_resume_data(session_, up_);
}

void h2_session::post(std::string_view session, std::uint64_t seq, std::string body) {
  // nghttp2 asks for the body when it sends the stream (take_output), not at submit.
  const auto id = submit("POST", request_path(s_, session, seq), true, body.size());
  posts_[id] = std::move(body);
}

bool h2_session::send_blocked() const { return !up_pending_.empty() || !posts_.empty(); }

std::string h2_session::take_output() {
  std::string out;
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) fail(std::string("h2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n <= 0) return out;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool h2_session::feed(const char* data, std::size_t n) {
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
  if (rv < 0) fail(std::string("h2: ") + nghttp2_strerror(static_cast<int>(rv)));
  if (error_.empty() && nghttp2_session_want_read(session_) == 0 && !ended_)
    fail("h2: the server closed the connection");
  return error_.empty();
}

}  // namespace vlessbench::xhttp
