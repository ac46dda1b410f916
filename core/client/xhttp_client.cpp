#include "core/client/xhttp_client.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <openssl/rand.h>

#include "core/client/vless_client.hpp"
#include "core/wire/http_parser.hpp"
#include "core/wire/uuid.hpp"

namespace vlessbench::xhttp {

std::string_view to_string(http_version v) { return v == http_version::h2 ? "h2" : "http/1.1"; }

http_version version_for(const transport_spec& t) {
  if (t.tls) return t.alpn == "http/1.1" ? http_version::h1 : http_version::h2;
  return t.alpn == "h2" ? http_version::h2 : http_version::h1;
}

mode client_mode(mode m) { return m == mode::any ? mode::packet_up : m; }

client_settings settings_for(const transport_spec& t, std::string authority, std::chrono::milliseconds post_interval) {
  client_settings s;
  s.authority = std::move(authority);
  s.path = normalize_path(t.path);
  s.speaks = client_mode(t.xhttp_mode);
  s.version = version_for(t);
  s.tls = t.tls;
  s.padding_min = t.padding_min;
  s.padding_max = std::max(t.padding_min, t.padding_max);
  s.max_post_bytes = t.max_post_bytes;
  s.post_interval = post_interval;
  return s;
}

std::string new_session_id() { return vless::format_uuid(vless::random_uuid()); }

std::size_t padding_length(const client_settings& s, std::uint64_t random) {
  const std::uint64_t span = std::uint64_t{s.padding_max} - s.padding_min + 1;
  return s.padding_min + static_cast<std::size_t>(random % span);
}

std::size_t random_padding_length(const client_settings& s) {
  std::uint64_t r = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&r), sizeof r);
  return padding_length(s, r);
}

std::string request_path(const client_settings& s, std::string_view session, std::optional<std::uint64_t> seq) {
  std::string p = s.path;
  p += session;
  if (seq) p += "/" + std::to_string(*seq);
  return p;
}

std::string referer(const client_settings& s, std::string_view path, std::size_t padding) {
  std::string r = s.tls ? "https://" : "http://";
  r += s.authority;
  r += path;
  r += "?x_padding=";
  r.append(padding, 'X');
  return r;
}

std::string h1_head(const client_settings& s, std::string_view method, std::string_view path, std::size_t padding,
                    h1_body body, std::size_t content_length) {
  std::string h;
  h.reserve(256 + padding);
  h.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ").append(s.authority);
  h.append("\r\nReferer: ").append(referer(s, path, padding)).append("\r\n");
  if (body == h1_body::chunked) h += "Content-Type: application/grpc\r\nTransfer-Encoding: chunked\r\n";
  if (body == h1_body::length) h += "Content-Length: " + std::to_string(content_length) + "\r\n";
  h += "\r\n";
  return h;
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<std::size_t>(n));
  out += data;
  out += "\r\n";
}

namespace {

// "404 Not Found" from a response head.
std::string status_text(const http::response& r) { return std::to_string(r.status) + " " + r.reason; }

}  // namespace

std::string h1_downlink::feed(std::string_view in, std::string& out) {
  if (!head_done_) {
    head_.append(in);
    const auto r = http::parse_response(head_);
    if (r.invalid()) return "bad response head: " + std::string(r.reason);
    if (r.need_more()) return head_.size() > http::max_head_bytes ? "response head too large" : "";
    if (r.value.status != 200) return status_text(r.value);
    head_done_ = true;
    chunked_ = r.value.chunked;
    remaining_ = r.value.content_length;
    const std::string rest = head_.substr(r.consumed);
    head_.clear();
    head_.shrink_to_fit();
    in = {};
    if (rest.empty()) return "";
    return feed(rest, out);
  }
  if (ended_) return "";
  if (chunked_) {
    const auto r = chunks_.feed(in, out, std::string::npos);
    if (r.invalid()) return "downlink: " + std::string(r.reason);
    ended_ = r.complete();
    return "";
  }
  if (remaining_) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(*remaining_, in.size()));
    out.append(in.substr(0, n));
    *remaining_ -= n;
    ended_ = *remaining_ == 0;
    return "";
  }
  out.append(in);
  return "";
}

std::string h1_answers::feed(std::string_view in) {
  in_.append(in);
  for (;;) {
    if (body_left_ > 0) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, in_.size()));
      in_.erase(0, n);
      body_left_ -= n;
      if (body_left_ > 0) return "";
      ++answered_;
    }
    if (in_.empty()) return "";
    const auto r = http::parse_response(in_);
    if (r.invalid()) return "bad answer to a POST: " + std::string(r.reason);
    if (r.need_more()) return in_.size() > http::max_head_bytes ? "answer to a POST too large" : "";
    if (r.value.status != 200) return status_text(r.value);
    if (r.value.chunked) return "answer to a POST: chunked";
    closing_ = !r.value.keep_alive;
    in_.erase(0, r.consumed);
    body_left_ = r.value.content_length.value_or(0);
    if (body_left_ == 0) ++answered_;
  }
}

// ---- I/O ----

namespace {

// (No co_await inside a conditional expression: GCC 12 destroys its temporaries twice.)
awaitable<std::error_code> write_to(tcp::socket& socket, asio::ssl::stream<tcp::socket&>* tls, std::string_view data) {
  if (tls) {
    auto [ec, n] = co_await asio::async_write(*tls, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
    (void)n;
    co_return ec;
  }
  auto [ec, n] = co_await asio::async_write(socket, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
  (void)n;
  co_return ec;
}

awaitable<std::error_code> read_from(tcp::socket& socket, asio::ssl::stream<tcp::socket&>* tls, char* data,
                                     std::size_t size, std::size_t& n) {
  if (tls) {
    auto [ec, got] = co_await tls->async_read_some(asio::buffer(data, size), as_tuple_awaitable);
    n = got;
    co_return ec;
  }
  auto [ec, got] = co_await socket.async_read_some(asio::buffer(data, size), as_tuple_awaitable);
  n = got;
  co_return ec;
}

}  // namespace

struct client_transport::uplink_connection {
  explicit uplink_connection(const asio::any_io_executor& ex) : socket(ex) {}
  tcp::socket socket;
  std::optional<asio::ssl::stream<tcp::socket&>> tls;
  h1_answers answers;
  std::size_t sent = 0;  // requests written on this connection

  awaitable<std::error_code> write(std::string_view data) { return write_to(socket, tls ? &*tls : nullptr, data); }
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n) {
    return read_from(socket, tls ? &*tls : nullptr, data, size, n);
  }
};

client_transport::client_transport(const client_settings& s, tcp::socket& main, asio::ssl::stream<tcp::socket&>* tls,
                                   const tcp::endpoint& server, asio::ssl::context& context,
                                   const tls::client_options& options, bool nodelay)
    : s_(s),
      main_(main),
      tls_(tls),
      server_(server),
      context_(&context),
      options_(options),
      nodelay_(nodelay),
      session_(s.speaks == mode::stream_one ? std::string{} : new_session_id()),
      spacing_(main.get_executor()) {
  if (s_.version == http_version::h2) {
    own_h2_ = std::make_unique<h2_session>(s_);
    h2_ = own_h2_.get();
  }
}

client_transport::client_transport(const client_settings& s, std::shared_ptr<h2_connection> shared)
    : s_(s),
      main_(shared->socket_),
      tls_(shared->tls_ ? &*shared->tls_ : nullptr),
      nodelay_(true),
      session_(s.speaks == mode::stream_one ? std::string{} : new_session_id()),
      shared_(std::move(shared)),
      shared_sessions_before_(shared_->sessions_++),
      h2_(&shared_->h2_),
      spacing_(main_.get_executor()) {}

// A session on a shared connection ends its streams there (sent with the connection's flush).
client_transport::~client_transport() {
  if (shared_ && started_) shared_->h2_.end_session();
}

void client_transport::abort() {
  spacing_.cancel();
  if (shared_) shared_->close();  // a stuck session: the shared connection is remade
  if (uplink_) {
    std::error_code ignored;
    uplink_->socket.close(ignored);
  }
}

std::error_code client_transport::refused(std::string why) {
  if (error_.empty()) error_ = std::move(why);
  return make_error_code(vless::client_errc::xhttp_failed);
}

awaitable<std::error_code> client_transport::main_write(std::string_view data) { return write_to(main_, tls_, data); }

awaitable<std::error_code> client_transport::main_read(char* data, std::size_t size, std::size_t& n) {
  return read_from(main_, tls_, data, size, n);
}

awaitable<std::error_code> client_transport::dial_uplink() {
  uplink_ = std::make_unique<uplink_connection>(main_.get_executor());
  auto [ec] = co_await uplink_->socket.async_connect(server_, as_tuple_awaitable);
  if (ec) co_return ec;
  std::error_code ignored;
  if (nodelay_) uplink_->socket.set_option(tcp::no_delay(true), ignored);
  if (!s_.tls) co_return std::error_code{};
  uplink_->tls.emplace(uplink_->socket, *context_);
  tls::prepare_client(uplink_->tls->native_handle(), options_);
  auto [hec] = co_await uplink_->tls->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
  co_return hec;
}

awaitable<std::error_code> client_transport::handshake(awaitable<std::error_code> main_tls) {
  if (s_.version == http_version::h2 || !needs_get()) co_return co_await std::move(main_tls);
  // HTTP/1.1 with a GET: the POSTs' connection is dialled beside the GET's handshake.
  auto [a, b] = co_await (std::move(main_tls) && dial_uplink());
  co_return a ? a : b;
}

awaitable<std::error_code> client_transport::h2_flush() {
  for (;;) {
    const std::string out = h2_->take_output();
    if (!out.empty())
      if (auto ec = co_await main_write(out)) co_return ec;
    if (!h2_->error().empty()) co_return refused(h2_->error());
    if (!h2_->send_blocked()) co_return std::error_code{};
    // The server's window is full: read (its WINDOW_UPDATE, and data kept for read_some).
    char buf[16 * 1024];
    std::size_t n = 0;
    if (auto ec = co_await main_read(buf, sizeof buf, n)) co_return ec;
    h2_->feed(buf, n);
  }
}

// The downlink's request and the first uplink bytes, in as few writes as the version allows.
awaitable<std::error_code> client_transport::first_requests(std::string_view data) {
  started_ = true;
  if (h2_) {
    h2_->open(session_);
    if (s_.speaks == mode::packet_up) {
      up_ += data;
      co_return co_await post_due();  // the GET's HEADERS go out with the first POST
    }
    h2_->send(data);
    co_return co_await h2_flush();
  }
  const std::size_t padding = random_padding_length(s_);
  if (s_.speaks == mode::stream_one) {
    std::string out = h1_head(s_, "POST", request_path(s_), padding, h1_body::chunked);
    append_chunk(out, data);
    co_return co_await main_write(out);
  }
  if (auto ec = co_await main_write(h1_head(s_, "GET", request_path(s_, session_), padding, h1_body::none)))
    co_return ec;
  if (s_.speaks == mode::packet_up) {
    up_ += data;
    co_return co_await post_due();
  }
  std::string out = h1_head(s_, "POST", request_path(s_, session_), random_padding_length(s_), h1_body::chunked);
  append_chunk(out, data);
  co_return co_await uplink_->write(out);
}

awaitable<std::error_code> client_transport::post_due() {
  if (seq_ > 0) {
    const auto due = last_post_ + s_.post_interval;
    if (std::chrono::steady_clock::now() < due) {
      spacing_.expires_at(due);
      auto [ec] = co_await spacing_.async_wait(as_tuple_awaitable);
      if (ec) co_return ec;
    }
  }
  const std::size_t n = std::min<std::size_t>(up_.size(), s_.max_post_bytes);
  std::string body = up_.substr(0, n);
  up_.erase(0, n);
  last_post_ = std::chrono::steady_clock::now();
  const std::uint64_t seq = seq_++;
  if (h2_) {
    h2_->post(session_, seq, std::move(body));
    co_return co_await h2_flush();
  }
  co_return co_await h1_post(std::move(body));
}

// Reads the uplink connection until `until` of its requests are answered.
awaitable<std::error_code> client_transport::h1_read_answers(std::size_t until) {
  char buf[4096];
  while (uplink_->answers.answered() < until) {
    std::size_t n = 0;
    if (auto ec = co_await uplink_->read_some(buf, sizeof buf, n)) co_return ec;
    if (auto why = uplink_->answers.feed({buf, n}); !why.empty()) co_return refused(std::move(why));
  }
  co_return std::error_code{};
}

// One POST on the uplink connection, after the answers to the ones before it (each came long
// ago: the spacing); a connection the server closed is dialled again.
awaitable<std::error_code> client_transport::h1_post(std::string body) {
  if (auto ec = co_await h1_read_answers(uplink_->sent)) co_return ec;
  if (uplink_->answers.closing())
    if (auto ec = co_await dial_uplink()) co_return ec;
  std::string out = h1_head(s_, "POST", request_path(s_, session_, seq_ - 1), random_padding_length(s_),
                            h1_body::length, body.size());
  out += body;
  ++uplink_->sent;
  co_return co_await uplink_->write(out);
}

awaitable<std::error_code> client_transport::write(std::string_view data) {
  if (!started_) co_return co_await first_requests(data);
  if (s_.speaks != mode::packet_up) {
    if (h2_) {
      h2_->send(data);
      co_return co_await h2_flush();
    }
    std::string out;
    append_chunk(out, data);
    if (s_.speaks == mode::stream_one) co_return co_await main_write(out);
    co_return co_await uplink_->write(out);
  }
  // packet-up: a POST now if the spacing allows, else the bytes wait for the next one.
  up_ += data;
  while (up_.size() >= s_.max_post_bytes)
    if (auto ec = co_await post_due()) co_return ec;
  if (!up_.empty() && std::chrono::steady_clock::now() >= last_post_ + s_.post_interval) co_return co_await post_due();
  co_return std::error_code{};
}

awaitable<std::error_code> client_transport::read_some(char* data, std::size_t size, std::size_t& n) {
  n = 0;
  // What waits for the spacing goes before the downlink is waited for.
  if (!up_.empty())
    if (auto ec = co_await post_due()) co_return ec;
  for (;;) {
    std::string& in = h2_ ? h2_->received() : down_in_;
    if (!in.empty()) {
      n = std::min(size, in.size());
      std::memcpy(data, in.data(), n);
      in.erase(0, n);
      co_return std::error_code{};
    }
    if (h2_ && !h2_->error().empty()) co_return refused(h2_->error());
    if (h2_ ? h2_->ended() : down_.ended()) co_return asio::error::eof;
    std::size_t got = 0;
    if (auto ec = co_await main_read(data, size, got)) co_return ec;
    if (h2_) {
      h2_->feed(data, got);
      // Acks and WINDOW_UPDATEs go out now: the server may be waiting for them.
      if (const std::string acks = h2_->take_output(); !acks.empty())
        if (auto ec = co_await main_write(acks)) co_return ec;
      continue;
    }
    if (auto why = down_.feed({data, got}, down_in_); !why.empty()) co_return refused(std::move(why));
  }
}

awaitable<std::error_code> h2_connection::connect(const tcp::endpoint& server, asio::ssl::context& context,
                                                  const tls::client_options& options, bool nodelay) {
  auto [ec] = co_await socket_.async_connect(server, as_tuple_awaitable);
  if (ec) co_return ec;
  std::error_code ignored;
  if (nodelay) socket_.set_option(tcp::no_delay(true), ignored);
  if (!h2_.settings().tls) co_return std::error_code{};
  tls_.emplace(socket_, context);
  tls::prepare_client(tls_->native_handle(), options);
  auto [hec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
  co_return hec;
}

awaitable<std::error_code> h2_connection::flush() {
  const std::string out = h2_.take_output();
  if (out.empty()) co_return std::error_code{};
  co_return co_await write_to(socket_, tls_ ? &*tls_ : nullptr, out);
}

void h2_connection::close() {
  std::error_code ignored;
  socket_.close(ignored);
}

}  // namespace vlessbench::xhttp
