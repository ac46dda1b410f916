#pragma once
// sing-mux (sing-box's and mihomo's multiplex) as a framing of the sub-connection engine
// (server/sub_engine.hpp): the client's smux or yamux streams (core/wire/smux_frame.hpp,
// core/wire/yamux_frame.hpp, each stream opening with a sing-mux stream request,
// core/wire/sing_mux.hpp), or h2mux's CONNECT streams, become the engine's events (open, data, end,
// and the credits that give a stream's window back once the engine has taken its bytes); the
// engine's data and ends become stream data and closes. So a sing-mux stream is a sub of its
// session exactly as a Mux.Cool sub is: the same dialer and destination policy, the same per-sub
// bounds and client budget, the same vless.sub line and `sub=N` in the route. Pure: no sockets;
// server/sing_mux_session.hpp moves the bytes and tests/unit/server/test_sing_mux_framing.cpp pins
// the rules.
//
// What the framing owns (docs/sessions.md "sing-mux"):
// - the session request (version, protocol, padding);
// - h2mux: the HTTP/2 layer is an h2_framing the server gives (its nghttp2 driver, the gRPC transport's,
//   server/sing_mux_h2.hpp); each CONNECT stream is a stream here as an smux or yamux one is, its window
//   given back as the engine takes its bytes (credit events), data past the client's window held by that
//   driver;
// - sub ids: each stream gets a free 16-bit id of its own while the engine has it (the vless.sub line's
//   mux_id);
// - the stream request: TCP or UDP, a destination, for UDP per-packet destinations (the open then
//   names the first packet's, later packets carry theirs);
// - the response status the client reads first: 0 before a stream's first data, 1 and a message when
//   the engine ends a stream that never answered with data and an error;
// - UDP packet framing both ways, and the padding of the first 16 records each way;
// - yamux's session frames (ping answered, go-away noted), its ACK of every SYN at once (a client
//   gives up the whole session if an open is not acknowledged in 5 s), and both directions' windows:
//   the client's data is credited back once the engine has taken it (a credit event after its data,
//   applied by consumed()), data past a window the client granted waits here (held) until it grants
//   more; smux version 2's UPD the same way. So with windows the client's bytes can be read on while
//   the engine pauses (their control frames must be: a window update for the way back arrives behind
//   data the engine is not taking yet), and what waits for the engine stays within the windows
//   (windowed());
// - refusals: too many live streams, a bad stream request, a bad UDP packet end that stream with a
//   reason (refusals()); a frame the framing does not allow, a yamux stream past its window or a
//   duplicate open end the session (up() returns the reason).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/wire/destination.hpp"
#include "core/wire/sing_mux.hpp"

namespace vlessbench::sing_mux {

struct stream_refusal {
  std::uint32_t stream = 0;  // the client's stream id
  std::string_view reason;
  std::string dest;  // when the request was read
  std::string note;  // what came instead of a stream (h2mux: the method of a request not CONNECT)
};

// An event for the sub-connection engine, in the order the client's bytes gave them.
struct sub_event {
  enum class kind_t : std::uint8_t { open, data, end, credit };
  kind_t kind = kind_t::data;
  std::uint16_t id = 0;             // open, data, end: the sub's
  std::optional<destination> dest;  // open: its destination; data: a datagram's own
  std::string data;                 // open (its first data, when has_data), data
  bool has_data = false;            // open
  std::uint32_t stream = 0;         // credit: consumed(stream, bytes) once the events before it are taken
  std::size_t bytes = 0;
};
using sub_events = std::deque<sub_event>;

// h2mux's HTTP/2 server, over bytes (no sockets): what the framing needs of it.
class h2_framing {
 public:
  struct event {
    enum class kind_t : std::uint8_t { opened, data, ended, reset };
    kind_t kind = kind_t::opened;
    std::uint32_t stream = 0;
    std::string data;  // data only
  };
  struct rejection {
    std::uint32_t stream = 0;
    std::string_view reason;  // static text
    std::string detail;
  };
  virtual ~h2_framing() = default;
  // The client's bytes; events appended in their order (per stream: open, data, end or reset).
  // Empty: go on; else why the connection ends (e.g. h2_bad_preface, h2_flood, h2_goaway_sent: ...).
  virtual std::string_view feed(std::string_view in, std::vector<event>& events) = 0;
  virtual void send(std::uint32_t stream, std::string_view data) = 0;
  virtual void finish(std::uint32_t stream) = 0;                   // END_STREAM after what was sent
  virtual void consumed(std::uint32_t stream, std::size_t n) = 0;  // n of its DATA bytes read: window back
  virtual std::size_t held() const = 0;                            // bytes waiting for the client's windows
  // Frames to write, appended. Non-empty: the connection is over (a GOAWAY for a violation went out), why.
  virtual std::string_view drain(std::string& to_client) = 0;
  virtual std::vector<rejection> take_rejected() = 0;  // streams answered with an HTTP error
};

class framing {
 public:
  // max_streams: live streams at once (the session's max_mux_subs; past it a stream is refused).
  // h2: h2mux's HTTP/2 layer, made when a session asks for h2mux; none: h2mux is refused (h2mux_unsupported).
  explicit framing(std::size_t max_streams, std::uint32_t seed = 1,
                   std::function<std::unique_ptr<h2_framing>()> h2 = {});

  // The client's bytes (the VLESS payload from its first byte) in; events for the engine are appended to
  // to_engine (the events not taken yet: a credit for bytes nothing waits for is given at once when it is
  // empty), answers for the client (ACKs, pongs, window updates, refusals, data a new window released) to
  // to_client. Empty: go on; else the reason the session ends.
  std::string_view up(std::string_view in, sub_events& to_engine, std::string& to_client);
  // The engine's side of sub id: data from its destination (from: a datagram's source), its close (error:
  // it failed) -> bytes for the client.
  void send(std::uint16_t id, std::string_view data, const destination* from, std::string& to_client);
  void closed(std::uint16_t id, bool error, std::string& to_client);
  // A credit event taken: bytes of stream's data are the engine's, its window is given back (window updates
  // appended to to_client).
  void consumed(std::uint32_t stream, std::size_t bytes, std::string& to_client);
  // Whether the client's sending is bounded by windows this framing grants (yamux, smux version 2): then
  // the client may be read without waiting for the engine.
  bool windowed() const { return is_yamux() || is_h2() || smux_version_ == 2; }
  // Bytes about to be written to the client, with the padding of the first records when asked for.
  std::string seal(std::string bytes);
  bool sealing() const { return req_ && req_->padding && sealed_ < padded_records; }

  const std::optional<request>& header() const { return req_; }
  std::size_t held() const { return held_ + (h2_ ? h2_->held() : 0); }  // data waiting for a client's window
  std::size_t live() const { return live_; }
  std::uint64_t refused() const { return refused_; }
  // The refusals since the last call (at most the first 16 of the session; refused() counts all).
  std::vector<stream_refusal> take_refusals() { return std::exchange(refusals_, {}); }

 private:
  struct stream {
    std::uint32_t sid = 0;
    std::uint16_t mux_id = 0;  // 0: the engine does not have it (not yet, or no more)
    bool opened = false;       // an open went to the engine
    bool requested = false;
    stream_request req;
    std::optional<destination> first_dest;  // packet_addr: the open's (replies without one)
    std::string pending;                    // the request cut short, a UDP packet cut short
    bool responded = false;                 // the status byte went out
    bool client_fin = false, reset = false, engine_end = false, closed_out = false;
    std::string held;  // data past the client's window
    bool fin_held = false;
    std::uint64_t send_window = 0;              // yamux
    std::uint64_t sent = 0, peer_consumed = 0;  // smux v2
    std::uint64_t peer_window = 0;              // smux v2
    std::uint64_t recv_window = 0, recv_unacked = 0, consumed = 0;
  };

  std::string_view frames_up(sub_events& to_engine, std::string& to_client);
  std::string_view smux_frame(sub_events& to_engine, std::string& to_client, std::size_t& at);
  std::string_view yamux_frame(sub_events& to_engine, std::string& to_client, std::size_t& at);
  std::string_view h2_frames(sub_events& to_engine, std::string& to_client);
  // A client's open; false: refused (answered already), or for yamux a duplicate (error_ set).
  stream* open(std::uint32_t sid, std::string& to_client);
  void data_up(stream& s, std::string_view data, sub_events& to_engine, std::string& to_client);
  void data_into(stream& s, std::string_view data, sub_events& to_engine, std::string& to_client);
  bool is_yamux() const { return req_ && req_->proto == protocol::yamux; }
  bool is_h2() const { return h2_ != nullptr; }
  void fin_up(stream& s, bool rst, sub_events& to_engine, std::string& to_client);
  void udp_up(stream& s, sub_events& to_engine, std::string& to_client);
  void open_to_engine(stream& s, const destination& t, std::string_view data, sub_events& to_engine);
  static void data_to_engine(const stream& s, std::string_view data, const destination* dest, sub_events& to_engine);
  static void end_to_engine(const stream& s, sub_events& to_engine);
  void refuse(stream& s, std::string_view reason, sub_events& to_engine, std::string& to_client);
  void send_data(stream& s, std::string_view data, std::string& to_client);
  void send_close(stream& s, std::string& to_client);
  void flush(stream& s, std::string& to_client);
  void credit(stream& s, std::size_t n, std::string& to_client);
  // The engine has ended s (or it was refused) and the client has not closed it yet: kept so that
  // what crosses the close is recognised, the latest max_ended of them only.
  void ended(std::uint32_t sid);
  void forget(std::uint32_t sid);
  static bool reading(const stream& s) { return !s.reset && !s.engine_end && !s.client_fin; }
  std::uint16_t free_mux_id() const;

  std::size_t max_streams_;
  std::minstd_rand rng_;
  std::function<std::unique_ptr<h2_framing>()> make_h2_;
  std::unique_ptr<h2_framing> h2_;
  std::vector<h2_framing::event> h2_events_;
  std::string error_text_;  // error_ when it comes from h2_
  std::string in_;          // client bytes not parsed yet (padding removed)
  std::optional<request> req_;
  unpadder unpad_;
  unsigned sealed_ = 0;
  std::uint8_t smux_version_ = 0;
  std::unordered_map<std::uint32_t, stream> streams_;
  std::unordered_map<std::uint16_t, std::uint32_t> by_mux_;
  std::deque<std::uint32_t> ended_;  // streams the engine ended, kept until the client closes them
  mutable std::uint16_t next_mux_ = 1;
  std::size_t live_ = 0;  // streams not ended by the engine (those count against max_streams)
  std::size_t held_ = 0;
  std::uint64_t refused_ = 0;
  std::vector<stream_refusal> refusals_;
  std::string_view error_;
};

}  // namespace vlessbench::sing_mux
