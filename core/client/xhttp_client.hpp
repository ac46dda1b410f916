#pragma once
// The client half of XHTTP (a share link's type=xhttp; the server's reading of the same requests
// is core/wire/xhttp_request.hpp). The one VLESS client (core/client/vless_client.hpp) hands it
// its connection after TLS and writes and reads the VLESS stream through it:
//   stream-one: one POST <path>; its body is the uplink, the answer's body the downlink;
//   packet-up:  GET <path><session> for the downlink, and each uplink chunk a
//               POST <path><session>/<seq> (seq 0, 1, 2 ...), started at least post_interval
//               after the one before (Xray's scMinPostsIntervalMs, 30 ms by default); what is
//               written meanwhile waits and goes in the next POST, as Xray batches it;
//   stream-up:  GET <path><session> and one streaming POST <path><session>.
// Every request carries x_padding (a run of 'X', its length drawn from the padding range) in
// its Referer's query, as Xray sends it; the session id is a random UUID.
// HTTP versions: over TLS, HTTP/1.1 when the link's alpn says http/1.1, else h2 (Xray's choice);
// over plain TCP, h2 with prior knowledge (h2c) when alpn=h2, else HTTP/1.1. Over HTTP/1.1 a
// session with a GET needs a second connection for its POSTs (the GET holds the first until the
// session ends): it is dialled beside the first connection's TLS handshake, as Xray's pool dials
// it, and closed with this object. Over h2 every request is a stream of the one connection.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "core/net/tls.hpp"
#include "core/wire/transport_spec.hpp"
#include "core/wire/xhttp_request.hpp"

struct nghttp2_session;

namespace vlessbench::xhttp {

enum class http_version { h1, h2 };
std::string_view to_string(http_version v);  // "http/1.1", "h2"
// What a link's transport speaks: see the header comment.
http_version version_for(const transport_spec& t);
// The mode a client speaks for a link's mode: auto is packet-up (Xray's choice without REALITY).
mode client_mode(mode m);

struct client_settings {
  std::string authority;   // Host / :authority
  std::string path = "/";  // the prefix, normalized ("/xh/")
  mode speaks = mode::packet_up;
  http_version version = http_version::h1;
  bool tls = true;
  std::uint32_t padding_min = 100;
  std::uint32_t padding_max = 1000;
  std::uint32_t max_post_bytes = 1'000'000;
  std::chrono::milliseconds post_interval{30};
};
// From a link's transport: the path normalized, the mode and HTTP version as above.
client_settings settings_for(const transport_spec& t, std::string authority, std::chrono::milliseconds post_interval);

// Pure request building (no I/O; unit-tested).
std::string new_session_id();  // a random UUID, 8-4-4-4-12
// A length in [padding_min, padding_max] from a random number.
std::size_t padding_length(const client_settings& s, std::uint64_t random);
std::size_t random_padding_length(const client_settings& s);
// The request target: stream-one the prefix, a download or stream-up POST prefix + session, a
// packet prefix + session + "/" + seq.
std::string request_path(const client_settings& s, std::string_view session = {},
                         std::optional<std::uint64_t> seq = std::nullopt);
// The Referer carrying the padding: "https://AUTHORITY/PATH?x_padding=XXX".
std::string referer(const client_settings& s, std::string_view path, std::size_t padding);
// How an HTTP/1.1 request's body goes.
enum class h1_body { none, chunked, length };
// An HTTP/1.1 request head; a POST with a streaming body (chunked) says Content-Type
// application/grpc, as Xray's client does.
std::string h1_head(const client_settings& s, std::string_view method, std::string_view path, std::size_t padding,
                    h1_body body, std::size_t content_length = 0);
// One chunk of a chunked body ("1a\r\n" data "\r\n"); empty data gives nothing (not the last chunk).
void append_chunk(std::string& out, std::string_view data);

// An HTTP/1.1 answer carrying a downlink: the head (a status other than 200 is the server's
// refusal), then a chunked body, Content-Length bytes, or everything until the connection closes.
class h1_downlink {
 public:
  // Takes bytes read; appends the body's payload to out. Empty: fine; else why the answer fails
  // ("404 Not Found", "bad chunk framing").
  std::string feed(std::string_view in, std::string& out);
  bool head_done() const { return head_done_; }
  bool ended() const { return ended_; }  // the body is complete (chunked or Content-Length)
  bool until_close() const { return head_done_ && !chunked_ && !remaining_; }

 private:
  std::string head_;
  bool head_done_ = false;
  bool chunked_ = false;
  std::optional<std::uint64_t> remaining_;
  chunked_decoder chunks_;
  bool ended_ = false;
};

// The answers to packet-up POSTs on the uplink connection, one after another: each a 200 with a
// Content-Length body (skipped).
class h1_answers {
 public:
  // Takes bytes read. Empty: fine; else the refusal ("413 Payload Too Large").
  std::string feed(std::string_view in);
  std::size_t answered() const { return answered_; }
  bool closing() const { return closing_; }  // the last answer said Connection: close

 private:
  std::string in_;
  std::uint64_t body_left_ = 0;
  std::size_t answered_ = 0;
  bool closing_ = false;
};

// XHTTP's requests over one HTTP/2 connection, as bytes (nghttp2; the caller does the I/O as
// with core/client/gun_client.hpp): a stream-one POST or a download GET, and packet POSTs.
class h2_session {
 public:
  explicit h2_session(const client_settings& s);
  ~h2_session();
  h2_session(const h2_session&) = delete;
  h2_session& operator=(const h2_session&) = delete;

  // The downlink's request: stream-one's POST (its body fed by send()) or the session's GET.
  void open(std::string_view session);
  // stream-one and stream-up: more of the streaming body.
  void send(std::string_view data);
  // The XHTTP session's streams reset (CANCEL): the server ends its VLESS connection; the HTTP/2
  // connection stays for the next session (open() again).
  void end_session();
  // packet-up: one POST carrying body, END_STREAM after it.
  void post(std::string_view session, std::uint64_t seq, std::string body);
  std::string take_output();
  bool feed(const char* data, std::size_t n);
  bool send_blocked() const;
  std::string& received() { return received_; }
  bool ended() const { return ended_; }
  const std::string& error() const { return error_; }
  const client_settings& settings() const { return s_; }

 private:
  struct callbacks;
  void fail(std::string why);
  std::int32_t submit(std::string_view method, const std::string& path, bool body, std::size_t content_length);

  client_settings s_;
  nghttp2_session* session_ = nullptr;
  std::int32_t down_ = -1;  // the downlink's stream
  std::int32_t up_ = -1;    // the streaming body's stream (stream-one: the same)
  std::string up_pending_;
  std::map<std::int32_t, std::string> posts_;   // packet bodies not yet handed to nghttp2
  std::map<std::int32_t, std::string> status_;  // :status per stream
  std::set<std::int32_t> streams_;              // the XHTTP session's (an earlier session's are not)
  std::string received_;
  bool ended_ = false;
  std::string error_;
};

// An HTTP/2 connection that XHTTP sessions ride one after another (Xray's XMUX: a new VLESS
// connection as a new XHTTP session on an open HTTP/2 connection, no handshake). The runner
// makes it outside any sample (connect), a session's client attaches to it
// (vless::client::attach); what an ended session leaves to send (its RST_STREAMs) goes out with
// flush() before the next sample.
class h2_connection {
 public:
  h2_connection(const asio::any_io_executor& ex, const client_settings& s) : socket_(ex), h2_(s) {}
  // TCP connect, TLS (ALPN h2 from the context) when s.tls.
  awaitable<std::error_code> connect(const tcp::endpoint& server, asio::ssl::context& context,
                                     const tls::client_options& options, bool nodelay);
  awaitable<std::error_code> flush();
  bool usable() const { return socket_.is_open() && h2_.error().empty(); }
  void close();
  std::uint64_t sessions() const { return sessions_; }  // XHTTP sessions opened on it so far

 private:
  friend class client_transport;
  tcp::socket socket_;
  std::optional<asio::ssl::stream<tcp::socket&>> tls_;
  h2_session h2_;
  std::uint64_t sessions_ = 0;
};

// The I/O: what vless::client calls for a transport = xhttp connection.
class client_transport {
 public:
  // main: the connection the VLESS client made (TLS stream when tls != nullptr). The uplink
  // connection of HTTP/1.1 with a GET is dialled to server with context and options.
  client_transport(const client_settings& s, tcp::socket& main, asio::ssl::stream<tcp::socket&>* tls,
                   const tcp::endpoint& server, asio::ssl::context& context, const tls::client_options& options,
                   bool nodelay);
  // A session on a shared HTTP/2 connection (no handshake of its own).
  client_transport(const client_settings& s, std::shared_ptr<h2_connection> shared);
  ~client_transport();
  client_transport(const client_transport&) = delete;
  client_transport& operator=(const client_transport&) = delete;

  // Runs main's TLS handshake (when there is one) and, over HTTP/1.1 with a GET, dials the
  // uplink connection beside it.
  awaitable<std::error_code> handshake(awaitable<std::error_code> main_tls);
  awaitable<std::error_code> write(std::string_view data);
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n);
  // Closes what this object owns (the uplink connection, the spacing timer): a watchdog's cut.
  void abort();
  // Why the server refused a request ("404 Not Found"); empty otherwise.
  const std::string& error() const { return error_; }
  // The requests this connection carried: packet POSTs sent so far.
  std::uint64_t posts() const { return seq_; }
  // It rode an HTTP/2 connection that carried an XHTTP session before it.
  bool rode_shared() const { return shared_ && shared_sessions_before_ > 0; }

 private:
  struct uplink_connection;
  bool needs_get() const { return s_.speaks != mode::stream_one; }
  awaitable<std::error_code> dial_uplink();
  awaitable<std::error_code> main_write(std::string_view data);
  awaitable<std::error_code> main_read(char* data, std::size_t size, std::size_t& n);
  awaitable<std::error_code> h2_flush();
  awaitable<std::error_code> first_requests(std::string_view data);
  awaitable<std::error_code> post_due();  // packet-up: the next POST once the spacing allows
  awaitable<std::error_code> h1_post(std::string body);
  awaitable<std::error_code> h1_read_answers(std::size_t until);
  std::error_code refused(std::string why);

  client_settings s_;
  tcp::socket& main_;
  asio::ssl::stream<tcp::socket&>* tls_;
  tcp::endpoint server_;
  asio::ssl::context* context_ = nullptr;
  tls::client_options options_;
  bool nodelay_;
  std::string session_;
  std::unique_ptr<h2_session> own_h2_;
  std::shared_ptr<h2_connection> shared_;
  std::uint64_t shared_sessions_before_ = 0;
  h2_session* h2_ = nullptr;  // own_h2_'s or shared_'s
  std::unique_ptr<uplink_connection> uplink_;
  h1_downlink down_;
  std::string down_in_;  // h1: decoded downlink bytes not yet read
  bool started_ = false;
  std::string up_;  // packet-up: written, not yet posted
  std::uint64_t seq_ = 0;
  std::chrono::steady_clock::time_point last_post_{};
  asio::steady_timer spacing_;
  std::string error_;
};

}  // namespace vlessbench::xhttp
