#pragma once
// The client side of Mux.Cool (VLESS command 3, issue 12): many sub-connections
// over one VLESS connection, framed with core/wire/mux_frame.hpp.
//
// Two layers:
//  - sub_table: pure (bytes in, bytes out, no sockets). It numbers
//  sub-connections (ids from 1,
//    as v2ray/Xray clients do), encodes New (with the first data), Keep and End
//    frames, and reads the server's frames into per-sub inbound buffers: a TCP
//    sub's bytes as a stream, a UDP sub's Keep frames as datagrams (with XUDP,
//    each may name its own address). The server never sends New; data for a sub
//    that is gone (late bytes after our End) is dropped and counted.
//  - connection: one VLESS connection made with command 3 (the request header
//  carries no address;
//    v2ray/Xray clients dial the pseudo destination "v1.mux.cool" for it)
//    through vless::client, so every transport the client speaks (tcp, ws,
//    httpupgrade, grpc; TLS or not) carries mux. Reads are pulled: the sub that
//    wants bytes reads the connection and files every frame it gets under its
//    sub; another sub waiting at the same time waits for that reader to deliver
//    (one read and one write in flight, as the TLS stream allows; over grpc,
//    whose writes may read, use one operation at a time). End frames are queued
//    by end() (it is not a coroutine, so a sample's close costs no write) and
//    go out with the next write or flush().
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "core/net/asio_compat.hpp"
#include "core/wire/mux_frame.hpp"
#include "core/client/vless_client.hpp"

namespace vlessbench::mux {

// host:port as a Mux.Cool target: an IPv4/IPv6 literal as its raw bytes,
// anything else as a domain (nullopt: empty or longer than 255 bytes, or port
// 0).
std::optional<target> make_target(network net, std::string_view host, std::uint16_t port);

// The VLESS request of a mux connection: command 3, no address
// (vless::encode_request).
vless::request_header vless_request(const uuid_bytes& uuid);

// One datagram of a UDP sub; from: the address an XUDP Keep frame named
// (nullopt without one).
struct packet {
  std::string data;
  std::optional<target> from;
};

class sub_table {
 public:
  // At most this many subs open at once (0 would refuse every open); ids wrap
  // from 65535 to 1 and skip ids still open.
  explicit sub_table(std::size_t max_subs = 128, std::size_t max_buffered = 16u << 20)
      : max_subs_(max_subs), max_buffered_(max_buffered) {}

  // A New frame for dest (with first_data when non-empty; at most 65535 bytes
  // of it go in the frame, the rest in Keep frames) appended to out; nullopt
  // when max_subs are open. xudp (UDP only) makes later packets carry their own
  // address; global_id is XUDP's optional 8 bytes.
  std::optional<std::uint16_t> open(std::string& out, const target& dest, std::string_view first_data = {},
                                    bool xudp = false,
                                    std::optional<std::array<std::uint8_t, 8>> global_id = std::nullopt);
  // Keep frames with data (split at 65535 bytes); false when id is not open
  // here.
  bool write(std::string& out, std::uint16_t id, std::string_view data);
  // One Keep frame with one datagram; on an XUDP sub with its own target (`to`,
  // or the sub's).
  bool write_packet(std::string& out, std::uint16_t id, std::string_view datagram, const target* to = nullptr);
  // An End frame; the sub is forgotten (its unread bytes too). false when id is
  // not open here.
  bool end(std::string& out, std::uint16_t id);

  // The server's bytes: frames are filed under their subs; a partial frame
  // waits for the rest. Returns the reason of the first invalid frame (the
  // connection is then unusable), else empty.
  std::string feed(std::string_view bytes);

  // Stream bytes of a TCP sub, up to size; 0 when none are buffered.
  std::size_t take(std::uint16_t id, char* data, std::size_t size);
  // The next datagram of a UDP sub.
  std::optional<packet> take_packet(std::uint16_t id);
  bool has_data(std::uint16_t id) const;
  // The server ended the sub (End frame); error when it set the error option.
  bool remote_ended(std::uint16_t id) const;
  bool remote_error(std::uint16_t id) const;
  bool is_open(std::uint16_t id) const { return subs_.count(id) != 0; }

  std::size_t open_count() const { return subs_.size(); }
  std::uint64_t opened() const { return opened_; }
  std::uint64_t dropped_bytes() const { return dropped_bytes_; }  // for subs already gone
  std::uint64_t keep_alives() const { return keep_alives_; }

 private:
  struct sub {
    target dest;
    bool xudp = false;
    bool ended = false;
    bool error = false;
    std::string stream;          // TCP
    std::deque<packet> packets;  // UDP
    std::size_t buffered = 0;
  };
  std::string file(const frame& f);

  std::size_t max_subs_;
  std::size_t max_buffered_;
  std::map<std::uint16_t, sub> subs_;
  std::uint16_t next_id_ = 1;
  std::string in_;  // a partial frame
  std::uint64_t opened_ = 0;
  std::uint64_t dropped_bytes_ = 0;
  std::uint64_t keep_alives_ = 0;
};

// Errors of the mux layer (everything else is the VLESS client's, a socket's or
// TLS's).
enum class errc { bad_frame = 1, sub_ended, sub_error, too_many_subs, closed };
const std::error_category& category();
std::error_code make_error_code(errc e);

class connection {
 public:
  // plan.header must be a command 3 request (vless_request above). The plan
  // outlives this.
  connection(asio::any_io_executor ex, const vless::client_plan& plan);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // TCP connect and the transport's handshake (TLS, upgrade); the VLESS header
  // goes with the first frame, or alone with send_header().
  awaitable<std::error_code> connect();
  awaitable<std::error_code> handshake();
  awaitable<std::error_code> send_header();
  bool usable() const { return usable_; }
  const std::string& failure() const { return failure_; }  // why it became unusable

  // A new sub to dest; its New frame carries first_data (may be empty) in one
  // write.
  awaitable<std::error_code> open(const target& dest, std::string_view first_data, std::uint16_t& id);
  awaitable<std::error_code> write(std::uint16_t id, std::string_view data);
  // A new UDP sub to dest (dest.net is udp) whose New frame carries the first datagram. xudp:
  // the New frame carries global_id and every later packet names its address (XUDP).
  awaitable<std::error_code> open_udp(const target& dest, std::string_view first_datagram, bool xudp,
                                      std::optional<std::array<std::uint8_t, 8>> global_id, std::uint16_t& id);
  // One datagram on a UDP sub (one Keep frame).
  awaitable<std::error_code> write_packet(std::uint16_t id, std::string_view datagram);
  // The next datagram of a UDP sub; asio::error::eof once the server ended it and its packets
  // are read, errc::sub_error when it ended it with the error option.
  awaitable<std::error_code> read_packet(std::uint16_t id, packet& out);
  // Bytes of a TCP sub; asio::error::eof once the server ended it and its bytes
  // are read, errc::sub_error when it ended it with the error option.
  awaitable<std::error_code> read_some(std::uint16_t id, char* data, std::size_t size, std::size_t& n);
  // Queues the sub's End frame (sent with the next write or by flush()).
  void end(std::uint16_t id);
  // Writes queued End frames.
  awaitable<std::error_code> flush();
  // Closes the socket: every pending operation ends; the connection is unusable
  // afterwards.
  void close();

  const sub_table& subs() const { return table_; }
  SSL* native_handle() { return client_.native_handle(); }

 private:
  awaitable<std::error_code> send(std::string& frames);
  awaitable<void> wait_turn();
  // One read of the connection filed under the subs (or a wait while another sub reads).
  awaitable<std::error_code> pull();
  void wake();
  void fail(std::string why);

  tcp::socket socket_;
  vless::client client_;
  sub_table table_;
  std::string pending_;        // queued End frames
  asio::steady_timer signal_;  // waiters of a busy reader or writer; cancel() wakes them
  bool reading_ = false;
  bool writing_ = false;
  std::size_t write_waiters_ = 0;  // sends waiting for the writer's turn
  bool usable_ = false;
  std::string failure_;
  std::unique_ptr<char[]> scratch_;
};

}  // namespace vlessbench::mux

namespace std {
template <>
struct is_error_code_enum<vlessbench::mux::errc> : true_type {};
}  // namespace std
