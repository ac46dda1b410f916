#pragma once
// What a VLESS session knows regardless of its transport (docs/sessions.md): its ids and route
// info, admission slots, counters, deadlines, close reason and its log line. Ordinary code, built
// once in server/session_core.cpp; the template over the transport (server/vless_session.hpp)
// derives from it and keeps only what touches the sockets: the opening, the header read, the
// upstream connect and the relay loops.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/log/access_events.hpp"
#include "core/net/delivery_watch.hpp"
#include "core/net/tcp_info.hpp"
#include "core/net/watchdog.hpp"
#include "server/client_budget.hpp"
#include "core/wire/session_info.hpp"
#include "core/wire/vless_codec.hpp"
#include "server/reject_code.hpp"
#include "server/relay_common.hpp"
#include "server/transport/transport.hpp"
#include "server/upstream_dialer.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

// What the relay that ran (whole TCP or UDP, Mux.Cool, sing-mux, Vision) adds to the session's
// line; string views into the relay, which outlives the line's writing.
struct relay_summary {
  bool mux = false;  // cmd "mux": Mux.Cool or sing-mux
  std::optional<std::uint64_t> packets_up, packets_down;
  std::optional<std::uint64_t> subs, subs_refused;
  std::string_view mux_error;
  std::optional<vision_facts> vision;
  std::string_view sing_mux;
};

// Where a session is; the vless.reject line names it (to_string), and a drain or a deadline that
// comes while the session shuts TLS down cuts only that shutdown.
enum class session_phase : std::uint8_t { tls, header, resolve, connect, relay, close };
std::string_view to_string(session_phase p);

// What ended a session from outside its own I/O: the watchdog's deadline, a drain, an eviction
// while it was pending, a reload that removed its user, the minimum-rate rule. One value, set
// once: the first cause wins (the sockets it closed make every later step fail).
class session_ending {
 public:
  enum class cause : std::uint8_t { none, timeout, drain, evicted, user_removed, slow_transfer };

  // after_relay: the relay had ended already (the session was shutting TLS down), so the cause
  // cut only that shutdown and the relay's own reason stands.
  void record(cause c, bool after_relay);
  cause what() const { return what_; }
  bool is(cause c) const { return what_ == c; }

  // The session's close reason, given the one its relay ended with (or rejected): the cause's
  // when it cut the relay, else the relay's. An eviction is a refusal (reject_io names it).
  close_reason settle(close_reason relay) const;

 private:
  cause what_ = cause::none;
  bool after_relay_ = false;
};

class session_core {
 public:
  // What a relay reads of its session: the runtime, the listener, the config, the ids and route
  // info, the client connection's budget.
  runtime& rt;
  std::shared_ptr<listener_runtime> listener;

 protected:
  std::shared_ptr<asio::ssl::context> tls_ctx;  // keeps the context alive across a reload

 public:
  std::shared_ptr<const config> cfg;  // at accept; the current one from the admission steps on
  std::string listener_name;          // as it was at accept
  std::shared_ptr<route_info> info = std::make_shared<route_info>();
  // The client connection's budget: destroyed after the holds below, which count in it.
  std::shared_ptr<connection_budget> budget;

  // Takes everything but the socket out of start.
  session_core(runtime& r, session_start& start);

  std::int64_t now_us() const {
    return std::chrono::duration_cast<microseconds>(steady_clock::now() - accepted).count();
  }
  const vless::request_header& request() const { return header; }
  bool is_udp() const { return header.command == static_cast<std::uint8_t>(vless::command::udp); }
  bool is_mux() const { return header.command == static_cast<std::uint8_t>(vless::command::mux); }
  bool is_sing_mux() const;
  const limits_config& limits() const { return cfg->limits; }
  session_phase phase() const { return phase_; }
  void enter(session_phase p) { phase_ = p; }

  // What a relay does to its session. A transfer: the idle deadline moves on, and a rate sample
  // is due within a window (set only when none is: moving the deadline later is a store,
  // earlier wakes the watchdog).
  void touch() {
    last_transfer = steady_clock::now();
    idle_at = last_transfer + (is_udp() ? cfg->limits.udp_idle_timeout : cfg->limits.idle_timeout);
    if (cfg->limits.min_rate_bytes > 0 && sample_at == steady_clock::time_point::max())
      sample_at = last_transfer + cfg->limits.min_rate_window;
    deadline = next_deadline();
  }
  // Payload relayed: client -> destination (up), destination -> client (down).
  void count_up(std::uint64_t n) { bytes_up += n; }
  void count_down(std::uint64_t n) { bytes_down += n; }
  // A write towards the client is in progress (the rate rule samples what it delivered).
  void writing_down(bool on) { down_writing = on; }
  // The payload that came with the request header, at the front of the header's buffer (Vision
  // unpads it in place); take_payload: its first n bytes, taken out of the session (which
  // releases the header's buffer).
  char* payload() { return buf.data(); }
  std::string take_payload(std::size_t n) {
    std::string out(buf.data(), n);
    std::vector<char>().swap(buf);
    return out;
  }
  // How the relay ends: r whatever ended it before (a framing the client broke, a write that
  // failed), ...
  void relay_ends(close_reason r) { reason = r; }
  // ... r unless another side's end was recorded first (a failed read after the other
  // direction had ended) ...
  void relay_fails(close_reason r) {
    if (reason == close_reason::client_eof) reason = r;
  }
  // ... and the destination's own end, unless the client had ended its side first (then the
  // destination's EOF follows from it).
  void destination_ends(close_reason r) {
    if (reason == close_reason::client_eof && !client_closed) reason = upstream_ended(r);
  }
  // The destination's side is done and the client's reads are stopped: a reader must not wait again.
  bool client_reads_stopped() const { return upstream_done; }

  // Something outside the session's I/O ends it (the caller closes the sockets); the first cause
  // is the one kept.
  void end_by(session_ending::cause c) { ending.record(c, phase_ == session_phase::close); }
  bool ended_by(session_ending::cause c) const { return ending.is(c); }
  bool timed_out() const { return ended_by(session_ending::cause::timeout); }

  // why: a reason of the server's own (reject_code) or one passed through from a parser or a
  // transport.
  void reject(reject_code why, std::string detail = {}) { reject(to_string(why), std::move(detail)); }
  void reject(std::string_view why, std::string detail = {});

  // An I/O step failed: because an eviction, the watchdog or a drain closed the sockets, or on
  // its own.
  void reject_io(reject_code on_timeout, std::string_view on_failure, std::string detail);

  // A failed dial as the session's reject: a lookup or connect the watchdog, an eviction or a
  // drain cut is named for that.
  void reject_dial(dial_failure f);

  // The destination's side ended the relay. During a drain that is the drain's doing: our own
  // target closes its idle keep-alive connections at once, and says close after a request.
  close_reason upstream_ended(close_reason r) const { return rt.stopping ? close_reason::drain : r; }

  // Authorised: the session takes a slot of max_sessions and is no longer pending.
  bool admit();

  // After the sockets closed: the close reason settled, the session's slots given back, its one
  // line written (vless.reject or vless.session). ja4: the transport's, which a handshake cut by
  // its deadline may have had.
  void finish(const transport::facts& t, const relay_summary& r);

 protected:
  steady_clock::time_point accepted;  // the session's clock starts here (session_start::began)
  watchdog_deadline deadline;

 private:
  session_phase phase_ = session_phase::tls;
  std::string reject_reason;
  std::string reject_detail;

 protected:
  close_reason reason = close_reason::client_eof;  // how the relay ended (or rejected); finish() settles it

 private:
  session_ending ending;

 protected:
  std::optional<user_admission> admitted;
  bool up_writing = false;    // a relay write towards the destination is in progress
  bool down_writing = false;  // a relay write towards the client is in progress
  // The relay's deadlines: idle_at (idle_timeout_ms after the last transfer) and, with the
  // minimum-rate rule on, a sample every min_rate_window while the relay is active.
  steady_clock::time_point idle_at{};
  steady_clock::time_point sample_at = steady_clock::time_point::max();

 private:
  steady_clock::time_point last_transfer{};
  delivery_watch to_client;
  delivery_watch to_upstream;

 protected:
  pending_set::ticket admission;  // pending until admitted: authorised and given a session slot

 private:
  std::optional<session_count> counted;                   // from admission on
  std::optional<bounded_count::hold> counted_for_client;  // max_sessions_per_client, from admission on

 protected:
  std::optional<connection_budget::upstream_slot> upstream_slot;  // the upstream socket's, once dialled
  bool client_closed = false;  // the client ended its side first: the upstream's EOF follows from it
  bool upstream_done = false;  // upstream_to_client has ended and cancelled the client's reads
  // After the destination's EOF on a transport without a half-close (ws, httpupgrade: their
  // lingers_after_upstream_eof), the client's reads go on until it closes or linger_until.
  bool lingering = false;
  steady_clock::time_point linger_until{};
  std::uint64_t bytes_up = 0;    // client -> destination payload
  std::uint64_t bytes_down = 0;  // destination -> client payload
  std::uint64_t header_bytes_seen = 0;
  vless::request_header header;
  std::string dest;
  std::optional<tcp_info_snapshot> tcpi;
  std::vector<char> buf;  // header bytes and the payload after them; released once relayed
  // The client socket's policy and its config generation when the client was accepted, and the
  // upstream policy applied when the upstream connection opened (a reload in between changes the
  // listener's copy): the log line reports the policies that were applied.
  tcp_policy policy_at_accept;
  tcp_policy upstream_policy_applied;
  path_emulation emulate_at_accept;

 private:
  std::uint64_t generation_at_accept = 0;

 protected:
  steady_clock::time_point next_deadline() const {
    const auto d = std::min(idle_at, sample_at);
    return lingering ? std::min(d, linger_until) : d;
  }

  // The relay's rate sample (the watchdog's deadline passed, in the relay, before idle_at), with
  // each direction's bytes delivered so far (read by the caller only while a write is in
  // progress). True: a peer has not taken min_rate_bytes over a whole window, the session ends as
  // slow; false: the next sample (or none, when idle) is set.
  bool rate_sample_failed(steady_clock::time_point now, std::uint64_t client_delivered, std::uint64_t upstream_acked);

  // A pending connection's deadlines never pass its pending deadline.
  steady_clock::time_point pending_deadline(steady_clock::time_point phase_deadline) const {
    return std::min(phase_deadline, accepted + cfg->limits.pending_timeout);
  }

 private:
  void log_reject(const transport::facts& t);
  void log_session(const transport::facts& t, const relay_summary& r);
};

}  // namespace vlessbench::vless_server::detail
