#pragma once
// The one VLESS client (DESIGN.md §5): TCP connect with the client's socket policy, TLS
// handshake, the request header with the first write (or alone, as split-writing clients send
// it), and the server's response header parsed off the first bytes read. Transports as share
// links name them (type=tcp|ws|httpupgrade|grpc|xhttp, path=, host=, ed=, serviceName=, mode=, alpn=,
// security=tls|none): grpc runs one HTTP/2 stream per connection (core/client/gun_client.hpp); xhttp
// its requests over HTTP/1.1 or h2 (core/client/xhttp_client.hpp); ws frames
// every write (masked, RFC 6455) and decodes the server's frames; with early data (ed=N) the
// upgrade waits for the first write and carries its first N bytes (base64url in
// Sec-WebSocket-Protocol, as Xray and sing-box send it), so no round trip is spent on it;
// httpupgrade with ed sends the first write right behind the request, before the 101. The runner's tunnel,
// the load generator and the tests all open VLESS sessions with it. It builds against BoringSSL
// and OpenSSL 3 (core's client half).
//
// Per-operation cost is what a hand-written client would pay: no timers (the caller owns the
// deadline and closes the socket to cut an operation short), and no allocation after the first
// write except when the response header arrives split over reads.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "core/client/gun_client.hpp"
#include "core/client/vision_client.hpp"
#include "core/client/xhttp_client.hpp"
#include "core/net/tls.hpp"
#include "core/wire/transport_spec.hpp"
#include "core/wire/vless_codec.hpp"
#include "core/wire/ws_frame.hpp"
#include "core/wire/ws_upgrade.hpp"

namespace vlessbench::vless {

// What every connection of one client needs, made once and outside any measurement: the TLS
// context (name resolution and context setup never fall inside a sample), the encoded header
// and the socket policy.
struct client_plan {
  tcp::endpoint server;
  std::shared_ptr<asio::ssl::context> tls_context;
  tls::client_options tls;
  std::string header;         // encoded request header
  bool nodelay = true;        // false: TCP_NODELAY left off, as Nagle-prone clients do
  bool split_header = false;  // true: the header is its own write (TLS record) after the handshake
  bool vision = false;        // flow xtls-rprx-vision (the header says so): raw TLS only
  transport_spec transport;   // what carries the stream (a share link's security=, type=, path= ...)
  // xhttp packet-up: the least time between the starts of two uplink POSTs (Xray's
  // scMinPostsIntervalMs; 0: none).
  std::chrono::milliseconds xhttp_post_interval{30};
};

// A TCP (command 1) request for host:port: an IPv4 or IPv6 literal travels as an address,
// anything else as a domain name.
request_header tcp_request(const uuid_bytes& uuid, std::string_view host, std::uint16_t port);
// The context from tls, the header encoded from request (throws std::invalid_argument as
// encode_request does); nodelay on, header with the first write.
client_plan make_client_plan(const tcp::endpoint& server, const tls::client_options& tls,
                             const request_header& request);
// No VLESS at all: TCP connect, TLS handshake, then the bytes as written and read (an empty
// header; no response header expected). What a bare TLS terminator in front of a target (HAProxy
// in TCP mode) is dialled with, so that floor goes through the same TLS code as a VLESS session.
client_plan make_bare_tls_plan(const tcp::endpoint& server, const tls::client_options& tls);

// The Host (:authority) an HTTP-based transport names: the link's host=, else the SNI, else the
// server's address.
std::string http_host(const client_plan& plan);

// Errors of the client itself (everything else is a socket or TLS error). The message is the
// whole reason: "vless response: bad_version".
enum class client_errc {
  bad_response = 1,
  upgrade_refused,
  bad_upgrade_response,
  bad_frame,
  grpc_failed,
  bad_vision,
  xhttp_failed
};
const std::error_category& client_category();
std::error_code make_error_code(client_errc e);

class client {
 public:
  // The socket is the caller's: closing it (a watchdog) ends any pending operation here.
  client(tcp::socket& socket, const client_plan& plan) : socket_(socket), plan_(plan) {}
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // TCP connect to plan.server, then the socket policy (TCP_NODELAY as planned).
  awaitable<std::error_code> connect();
  // TLS handshake on the connected socket (SNI etc. from plan.tls), and the upgrade for ws and
  // httpupgrade without early data. Afterwards the header goes with the first write, or, with
  // split_header, by send_header().
  awaitable<std::error_code> handshake();
  // xhttp over h2, in place of connect() and handshake(): a new XHTTP session on an open HTTP/2
  // connection (core/client/xhttp_client.hpp: h2_connection); the socket given is left unused.
  void attach(std::shared_ptr<xhttp::h2_connection> connection);
  bool splits_header() const { return plan_.split_header; }
  // split_header: writes the header alone (its own TLS record). Call once, after handshake().
  awaitable<std::error_code> send_header();
  // Writes data; the first write after handshake() carries the header in the same buffer, so
  // TLS makes one record of both (a buffer sequence would become two SSL_write calls and
  // quietly turn "one write" into "split").
  awaitable<std::error_code> write(std::string_view data);
  // Reads payload: the response header is parsed (parse_response) and removed from the first
  // bytes; n is never 0 on success. A malformed header is client_errc::bad_response.
  awaitable<std::error_code> read_some(char* data, std::size_t size, std::size_t& n);

  bool response_pending() const { return response_pending_; }
  SSL* native_handle() { return tls_ ? tls_->native_handle() : vision_tls_->native_handle(); }
  // Vision (plan.vision): the padding each way so far, and whether each direction went direct.
  const vision_client* vision() const { return vision_.get(); }
  // The server's reason when it refused the upgrade ("404 wrong_path"), failed the gRPC
  // stream ("grpc-status 13: ...") or refused an XHTTP request ("400 Bad Request"), else empty.
  const std::string& upgrade_error() const { return xhttp_ ? xhttp_->error() : upgrade_error_; }
  // xhttp: the transport (nullptr before handshake() and for other transports).
  xhttp::client_transport* xhttp() { return xhttp_.get(); }
  const xhttp::client_transport* xhttp() const { return xhttp_.get(); }

 private:
  // Removes the response header from data[0, n); false on a malformed header.
  bool strip_response(char* data, std::size_t& n);
  // Vision: our write padded (or, after direct, to the socket); the server's bytes unpadded.
  awaitable<std::error_code> vision_write(std::string_view data);
  std::error_code vision_read(char* data, std::size_t& n);
  // The stream beneath VLESS: TLS or the socket.
  awaitable<std::error_code> raw_write(std::string_view data);
  awaitable<std::error_code> raw_read(char* data, std::size_t size, std::size_t& n);
  // Reads the 101 (bytes after it stay in raw_in_).
  awaitable<std::error_code> read_upgrade_response();
  // VLESS bytes to the wire form: the deferred upgrade request first, ws frames.
  void frame_into(std::string& out, std::string_view data);
  std::string upgrade_request(std::string_view early) const;
  std::string http_host() const;
  // grpc: writes what the HTTP/2 session has to send, reading while DATA waits for the window.
  awaitable<std::error_code> h2_flush();
  awaitable<std::error_code> tls_handshake();
  std::error_code h2_error();

  tcp::socket& socket_;
  const client_plan& plan_;
  std::optional<asio::ssl::stream<tcp::socket&>> tls_;
  bool header_pending_ = false;    // goes with the next write()
  bool response_pending_ = false;  // not yet read
  std::string out_;                // header + first write, one buffer
  std::string response_head_;      // response header bytes when it arrives split over reads
  bool upgrade_deferred_ = false;  // early data: the upgrade request goes with the first write
  bool upgrade_unread_ = false;    // the 101 is still to be read
  std::string ws_key_;
  std::string raw_in_;  // bytes read past the 101
  std::optional<ws::frame_decoder> decoder_;
  bool eof_ = false;  // the server's close frame
  std::string pong_;  // a pong for the server's ping, sent with the next write
  std::string upgrade_error_;
  std::unique_ptr<gun::h2_client> h2_;
  std::unique_ptr<xhttp::client_transport> xhttp_;
  std::unique_ptr<fd_tls> vision_tls_;  // Vision's TLS, in place of tls_
  std::unique_ptr<vision_client> vision_;
};

}  // namespace vlessbench::vless

namespace std {
template <>
struct is_error_code_enum<vlessbench::vless::client_errc> : true_type {};
}  // namespace std
