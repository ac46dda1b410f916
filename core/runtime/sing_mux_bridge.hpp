#pragma once
// sing-mux (sing-box's and mihomo's multiplex) carried by the Mux.Cool relay: a pure translator between
// the client's smux or yamux streams (core/wire/smux_frame.hpp, core/wire/yamux_frame.hpp, each
// stream opening with a sing-mux stream request, core/wire/sing_mux.hpp) and the Mux.Cool frames
// server/mux_session.hpp already serves (core/wire/mux_frame.hpp). So a sing-mux stream is a sub of
// its session exactly as a Mux.Cool sub is: the same dialer and destination policy, the same per-sub
// bounds and client budget, the same vless.sub line and `sub=N` in the route. No sockets here;
// server/sing_mux_session.hpp moves the bytes and tests/unit/test_sing_mux.cpp pins the rules.
//
// What the translation owns (docs/sessions.md "sing-mux"):
// - the session request (version, protocol, padding); h2mux is refused by name (not served yet);
// - stream ids: each stream gets a free 16-bit Mux.Cool id of its own while the relay has it;
// - the stream request: TCP or UDP, a destination, for UDP per-packet destinations (the New then
//   names the first packet's, later packets ride Keep frames with theirs);
// - the response status the client reads first: 0 before a stream's first data, 1 and a message when
//   the relay ends a stream that never answered with data and an error;
// - UDP packet framing both ways, and the padding of the first 16 records each way;
// - yamux's session frames (ping answered, go-away noted), its ACK of every SYN at once (a client
//   gives up the whole session if an open is not acknowledged in 5 s), and both directions' windows:
//   the client's data is credited back once the relay has read it (relay_consumed), data past a window
//   the client granted waits here (held) until it grants more; smux version 2's UPD the same way. So with
//   windows the client's bytes can be read on while the relay pauses (their control frames must be: a
//   window update for the way back arrives behind data the relay is not taking yet), and what waits for
//   the relay stays within the windows (windowed());
// - refusals: too many live streams, a bad stream request, a bad UDP packet end that stream with a
//   reason (refusals()); a frame the framing does not allow, a yamux stream past its window or a
//   duplicate open end the session (up() returns the reason).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/wire/mux_frame.hpp"
#include "core/wire/sing_mux.hpp"

namespace vlessbench::sing_mux {

struct stream_refusal {
  std::uint32_t stream = 0;  // the client's stream id
  std::string_view reason;
  std::string dest;  // when the request was read
};

class bridge {
 public:
  // max_streams: live streams at once (the relay's max_mux_subs; past it a stream is refused).
  explicit bridge(std::size_t max_streams, std::uint32_t seed = 1);

  // The client's bytes (the VLESS payload from its first byte) in; Mux.Cool frames for the relay are
  // appended to to_relay, answers for the client (ACKs, pongs, window updates, refusals, data a new
  // window released) to to_client. Empty: go on; else the reason the session ends.
  std::string_view up(std::string_view in, std::string& to_relay, std::string& to_client);
  // Whole Mux.Cool frames from the relay (after its VLESS response header) -> bytes for the client.
  std::string_view down(std::string_view in, std::string& to_client);
  // The relay has read n more of the bytes up() appended to to_relay: their streams' windows are credited
  // (window updates appended to to_client).
  void relay_consumed(std::size_t n, std::string& to_client);
  // Whether the client's sending is bounded by windows this bridge grants (yamux, smux version 2): then
  // the client may be read without waiting for the relay.
  bool windowed() const { return is_yamux() || smux_version_ == 2; }
  // Bytes about to be written to the client, with the padding of the first records when asked for.
  std::string seal(std::string bytes);

  const std::optional<request>& header() const { return req_; }
  std::size_t held() const { return held_; }  // data waiting for a client's window
  std::size_t live() const { return live_; }
  std::uint64_t refused() const { return refused_; }
  // The refusals since the last call (at most the first 16 of the session; refused() counts all).
  std::vector<stream_refusal> take_refusals() { return std::exchange(refusals_, {}); }

 private:
  struct stream {
    std::uint32_t sid = 0;
    std::uint16_t mux_id = 0;  // 0: the relay does not have it (not yet, or no more)
    bool opened = false;       // a New went to the relay
    bool requested = false;
    stream_request req;
    std::optional<mux::target> first_dest;  // packet_addr: the New's (replies without one)
    std::string pending;                    // the request cut short, a UDP packet cut short
    bool responded = false;                 // the status byte went out
    bool client_fin = false, reset = false, relay_end = false, closed_out = false;
    std::string held;  // data past the client's window
    bool fin_held = false;
    std::uint64_t send_window = 0;                   // yamux
    std::uint64_t sent = 0, peer_consumed = 0;       // smux v2
    std::uint64_t peer_window = 0;                   // smux v2
    std::uint64_t recv_window = 0, recv_unacked = 0, consumed = 0;
  };

  std::string_view frames_up(std::string& to_relay, std::string& to_client);
  std::string_view smux_frame(std::string& to_relay, std::string& to_client, std::size_t& at);
  std::string_view yamux_frame(std::string& to_relay, std::string& to_client, std::size_t& at);
  // A client's open; false: refused (answered already), or for yamux a duplicate (error_ set).
  stream* open(std::uint32_t sid, std::string& to_client);
  void data_up(stream& s, std::string_view data, std::string& to_relay, std::string& to_client);
  void data_into(stream& s, std::string_view data, std::string& to_relay, std::string& to_client);
  bool is_yamux() const { return req_ && req_->proto == protocol::yamux; }
  void fin_up(stream& s, bool rst, std::string& to_relay, std::string& to_client);
  void udp_up(stream& s, std::string& to_relay, std::string& to_client);
  void new_to_relay(stream& s, const mux::target& t, std::string_view data, std::string& to_relay);
  void keep_to_relay(const stream& s, std::string_view data, const mux::target* dest, std::string& to_relay);
  void end_to_relay(stream& s, bool error, std::string& to_relay);
  void refuse(stream& s, std::string_view reason, std::string& to_relay, std::string& to_client);
  void send_data(stream& s, std::string_view data, std::string& to_client);
  void send_close(stream& s, std::string& to_client);
  void flush(stream& s, std::string& to_client);
  void credit(stream& s, std::size_t n, std::string& to_client);
  void forget(std::uint32_t sid);
  std::uint16_t free_mux_id() const;

  std::size_t max_streams_;
  std::minstd_rand rng_;
  std::string in_;  // client bytes not parsed yet (padding removed)
  std::optional<request> req_;
  unpadder unpad_;
  unsigned sealed_ = 0;
  std::uint8_t smux_version_ = 0;
  std::unordered_map<std::uint32_t, stream> streams_;
  std::unordered_map<std::uint16_t, std::uint32_t> by_mux_;
  std::deque<std::uint32_t> ended_;  // streams the relay ended, kept until the client closes them
  mutable std::uint16_t next_mux_ = 1;
  std::size_t live_ = 0;  // streams not ended by the relay (those count against max_streams)
  std::size_t held_ = 0;
  std::uint64_t refused_ = 0;
  std::vector<stream_refusal> refusals_;
  std::string down_in_;
  std::string_view error_;
  struct pending_credit {
    std::uint64_t relay_end = 0;  // credited once the relay has read this far
    std::uint32_t sid = 0;
    std::size_t bytes = 0;
  };
  std::deque<pending_credit> credits_;
  std::uint64_t produced_ = 0, consumed_ = 0;  // bytes for the relay: made, read
  std::size_t up_base_ = 0;                    // to_relay's size when this up() began
};

}  // namespace vlessbench::sing_mux
