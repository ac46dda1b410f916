#pragma once
// VLESS command 3 (Mux.Cool, XUDP included) inside a session (server/vless_session.hpp; docs/sessions.md "Mux"):
// the Mux.Cool framing of the sub-connection engine (server/sub_engine.hpp). Frames from the client
// (core/wire/mux_frame.hpp) go through the pure sub-connection table (server/mux_subs.hpp: ids, Mux.Cool's rules)
// and become the engine's events; the engine's data and ends go back as Keep and End frames. The client's stream
// is read only while the engine takes events (its back-pressure: Mux.Cool has no window of its own).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/wire/mux_frame.hpp"
#include "server/mux_subs.hpp"
#include "server/sub_engine.hpp"

namespace vlessbench::vless_server::detail {

class mux_relay final : sub_framing {
 public:
  // pending: the payload that came with the VLESS header (the session's buffer gives it up).
  mux_relay(session_core& s, client_stream& client, const asio::any_io_executor& ex, std::size_t pending);

  std::uint64_t subs() const { return engine_.subs(); }
  std::uint64_t refused() const { return engine_.refusals(); }
  std::string_view mux_error() const { return mux_error_; }

  // Reads and applies the client's frames until its stream ends or breaks the framing (the session's close
  // reason says which), then ends every sub-connection.
  awaitable<void> run();
  // Ends every sub-connection and awaits the engine's coroutines (server/sub_engine.hpp).
  awaitable<void> join() { return engine_.join(); }
  // Ends every sub-connection now (the session's sockets are closing); idempotent.
  void stop() { engine_.stop(); }

 private:
  static constexpr std::size_t relay_read = 64 * 1024;

  void handle(const mux::frame& f);
  void end_with_error(std::uint16_t id, std::string& out) const;

  // sub_framing: Keep and End frames.
  void send(std::uint16_t id, std::string_view data, const destination* from, std::string& out) override;
  void closed(std::uint16_t id, std::uint32_t number, bool tell, bool error, std::string& out) override;
  void open_refused(std::uint16_t id, std::string& out) override;
  bool ends_after_client_end() const override { return false; }

  session_core& s_;
  client_stream& client_;
  mux::sub_table table_;
  sub_engine engine_;
  std::string acc_;  // client bytes not yet parsed (the first filled_): < one frame + one read, then room
  std::size_t filled_ = 0;
  std::string_view mux_error_;
};

}  // namespace vlessbench::vless_server::detail
