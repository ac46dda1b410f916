#pragma once
// sing-mux (sing-box's and mihomo's multiplex; a VLESS TCP request to sp.mux.sing-box.arpa) inside a session
// (server/vless_session.hpp; docs/sessions.md "sing-mux"): the sing-mux framing (server/sing_mux_framing.hpp:
// smux, yamux, and h2mux on server/sing_mux_h2.hpp) turns the client's streams into events of the
// sub-connection engine (server/sub_engine.hpp), and the engine's data and ends into stream data and closes. So
// every stream is a sub of the session as a Mux.Cool sub is, through the same dialer, destination policy, per-sub
// bounds, client budget, vless.sub line and `sub=N` route; only the framing differs. This file moves the events:
// one reader of the client (see reader() for when it waits), the events it yields taken in their order while the
// engine takes more (paused(): a full sub), the framing's own answers (yamux ACKs, pongs, window updates,
// refusals) and its refusals as vless.sub lines. A sub's reader waits while the framing holds more than
// sing_mux_held_limit bytes for windows the client has not opened, as it does for a client that reads slowly.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/sing_mux_framing.hpp"
#include "server/sub_engine.hpp"

namespace vlessbench::vless_server::detail {

constexpr std::size_t sing_mux_held_limit = 1u << 20;
// Bytes for the client (answers: yamux ACKs and pongs, window updates, refusals; and the subs' data) waiting to
// be written: past it the client is not read until the writer has written them, so a client that sends and
// never reads costs this much, and the minimum-rate rule ends it (slow_transfer) as it does any peer that does
// not take what is written to it.
constexpr std::size_t sing_mux_out_limit = 256u << 10;

class sing_mux_relay final : sub_framing {
 public:
  // pending: the payload that came with the VLESS header (the session's buffer gives it up).
  sing_mux_relay(session_core& s, client_stream& client, const asio::any_io_executor& ex, std::size_t pending);

  std::uint64_t subs() const { return engine_.subs(); }
  std::uint64_t refused() const { return engine_.refusals() + framing_.refused(); }
  std::string_view mux_error() const { return error_; }
  std::string_view protocol() const {
    return framing_.header() ? sing_mux::to_string(framing_.header()->proto) : std::string_view();
  }

  // Takes the client's events until its stream ends or breaks the framing (the session's close reason says
  // which), then ends every sub-connection.
  awaitable<void> run();
  // The engine's coroutines, then the reader: none is left when the session shuts TLS down.
  awaitable<void> join();
  void stop();

 private:
  static constexpr std::size_t read_size = 64 * 1024;

  awaitable<void> reader();
  awaitable<void> take_events();
  void apply(sing_mux::sub_event& e);
  void fail(std::string_view why);
  void log_refusals();

  // sub_framing: the framing's stream data and closes.
  void send(std::uint16_t id, std::string_view data, const destination* from, std::string& out) override {
    framing_.send(id, data, from, out);
  }
  void closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) override;
  void open_refused(std::uint16_t id, std::string& out) override { framing_.closed(id, true, out); }
  bool ends_after_client_end() const override { return true; }  // a stream half-closed by the client gets a FIN
  bool holding() const override { return framing_.held() > sing_mux_held_limit; }
  void seal(std::string& bytes, std::size_t from) override;

  session_core& s_;
  client_stream& client_;
  sing_mux::framing framing_;
  sub_engine engine_;
  asio::steady_timer events_ready_;  // the taker waits here for events
  asio::steady_timer reader_wake_;   // the reader (without windows) waits here for the events to be taken
  asio::steady_timer reader_done_;   // join() waits here for the reader
  std::string first_;                // the payload that came with the VLESS header
  sing_mux::sub_events events_;      // events the engine has not taken yet
  std::size_t event_bytes_ = 0;      // their data
  std::error_code read_error_;       // the client's stream ended or broke: the taker ends once events_ is empty
  bool reading_ = false;
  bool stopped_ = false;
  std::string_view error_;
};

}  // namespace vlessbench::vless_server::detail
