#pragma once
// A VLESS session over any client transport (server/transport/transport.hpp): one coroutine owns
// the client connection and the upstream socket, TLS (or another transport's) opening -> VLESS
// header -> admission (server/admission.hpp) -> upstream connect -> relay -> one log line.
// A template, so each transport's session is compiled for it with no virtual call in the relay;
// server/vless_server.cpp picks the transport per listener. About 600 lines: the steps share the
// session's state, and a relay split out would take a dozen of its fields by reference.
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/log/access_events.hpp"
#include "server/buffer_pool.hpp"
#include "core/runtime/client_budget.hpp"
#include "core/net/delivery_watch.hpp"
#include "core/runtime/destination_policy.hpp"
#include "core/log/logging.hpp"
#include "core/net/policy_stream.hpp"
#include "core/wire/route_header.hpp"
#include "core/net/tcp_info.hpp"
#include "core/wire/vless_codec.hpp"
#include "core/net/watchdog.hpp"
#include "server/admission.hpp"
#include "server/mux_session.hpp"
#include "server/refusal_log.hpp"
#include "server/sing_mux_session.hpp"
#include "server/relay_common.hpp"
#include "server/transport/transport.hpp"
#include "server/udp_relay.hpp"
#include "server/upstream_dialer.hpp"
#include "server/vision_session.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

// One VLESS session over a client transport (server/transport/transport.hpp): raw TLS,
// WebSocket or HTTPUpgrade; the session never knows which.
template <transport::client_transport Transport>
struct session {
  runtime& rt;
  std::shared_ptr<listener_runtime> listener;
  std::shared_ptr<asio::ssl::context> tls_ctx;  // keeps the context alive across a reload
  std::shared_ptr<const config> cfg;            // at accept; the current one from the admission steps on
  std::string listener_name;                    // as it was at accept
  Transport client;
  policy_stream upstream;
  std::shared_ptr<route_info> info = std::make_shared<route_info>();
  // The client connection's budget: destroyed after the holds below, which count in it.
  std::shared_ptr<connection_budget> budget;
  steady_clock::time_point accepted = steady_clock::now();
  watchdog_deadline deadline;
  std::string_view phase = "tls";
  std::string reject_reason;
  std::string reject_detail;
  close_reason reason = close_reason::client_eof;
  bool timed_out = false;
  bool drained = false;
  bool shutdown_cut = false;  // the deadline or a drain cut only the TLS shutdown after the relay
  bool user_removed = false;  // ended by a reload that removed the user
  std::optional<user_admission> admitted;
  bool evicted = false;        // closed while pending, to admit a newer connection
  bool slow = false;           // closed by the minimum-rate rule
  bool up_writing = false;     // a relay write towards the destination is in progress
  bool down_writing = false;   // a relay write towards the client is in progress
  // The relay's deadlines: idle_at (idle_timeout_ms after the last transfer) and, with the
  // minimum-rate rule on, a sample every min_rate_window while the relay is active.
  steady_clock::time_point idle_at{};
  steady_clock::time_point sample_at = steady_clock::time_point::max();
  steady_clock::time_point last_transfer{};
  delivery_watch to_client;
  delivery_watch to_upstream;
  pending_set::ticket admission;  // pending until admitted: authorised and given a session slot
  std::optional<session_count> counted;  // from admission on
  std::optional<bounded_count::hold> counted_for_client;  // max_sessions_per_client, from admission on
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
  std::optional<route_registration> reg;
  std::optional<udp_upstream> udp_up;  // command 2 (UDP): the socket to the destination
  std::unique_ptr<mux_relay<session>> mux;  // command 3 (Mux.Cool): its sub-connections
  std::unique_ptr<sing_mux_relay<session>> sing_mux;  // sp.mux.sing-box.arpa: its streams, as Mux.Cool subs
  std::optional<tcp_info_snapshot> tcpi;
  std::vector<char> buf;  // header bytes and the payload after them; released once relayed
  upstream_dialer dialer;  // the destination's lookup and connect (server/upstream_dialer.hpp)
  // The client socket's policy and its config generation when the client was accepted, and the
  // upstream policy applied when the upstream connection opened (a reload in between changes the
  // listener's copy): the log line reports the policies that were applied.
  tcp_policy policy_at_accept;
  tcp_policy upstream_policy_applied;
  std::uint64_t generation_at_accept = 0;

  // Takes everything out of start; make(listener, tls context, socket) builds the transport.
  template <class Make>
  session(runtime& r, session_start& start, tcp::socket s, Make&& make)
      : rt(r),
        listener(std::move(start.listener)),
        tls_ctx(std::move(start.tls)),
        cfg(std::move(start.cfg)),
        listener_name(std::move(start.listener_name)),
        client(make(*listener, *tls_ctx, std::move(s))),
        upstream(tcp::socket(client.get_executor()), &listener->upstream_tcp),
        budget(start.budget ? std::move(start.budget) : r.clients.connect(start.client.address())),
        admission(std::move(start.pending)),
        dialer(r, client.get_executor()),
        policy_at_accept(start.policy),
        upstream_policy_applied(start.upstream_policy),
        generation_at_accept(start.generation) {
    info->session_id = start.session_id;
    info->listener = listener_name;
    info->quickack = std::string(to_string(policy_at_accept.quickack));
    info->client = format_endpoint(start.client);
    info->transport = std::string(client.facts().transport);
  }

  std::int64_t now_us() const {
    return std::chrono::duration_cast<microseconds>(steady_clock::now() - accepted).count();
  }
  tcp::socket& client_socket() { return client.socket(); }
  bool is_udp() const { return header.command == static_cast<std::uint8_t>(vless::command::udp); }
  bool is_mux() const { return header.command == static_cast<std::uint8_t>(vless::command::mux); }
  bool is_sing_mux() const { return is_sing_mux_request(header); }

  // The route entry goes first: once the socket is closed its identity is free for anyone else's
  // connection, which must never find this session's entry.
  void close_upstream() {
    if (reg) reg->release();
    if (udp_up) udp_up->close();
    std::error_code ignored;
    upstream.socket().close(ignored);
  }

  void close_sockets() {
    if (mux) mux->stop();
    if (sing_mux) sing_mux->stop();
    std::error_code ignored;
    client_socket().close(ignored);
    close_upstream();
    // A lookup is no socket: without this a slow DNS server would hold the session (and the
    // watchdog's || with it) past the connect deadline until getaddrinfo gives up.
    dialer.cancel();
  }

  void on_timeout() {
    shutdown_cut = phase == "close";
    timed_out = true;
    close_sockets();
  }

  // A transfer in the relay: the idle deadline moves on, and a rate sample is due within a window
  // (set only when none is: moving the deadline later is a store, earlier wakes the watchdog).
  void touch() {
    last_transfer = steady_clock::now();
    idle_at = last_transfer + (is_udp() ? cfg->limits.udp_idle_timeout : cfg->limits.idle_timeout);
    if (cfg->limits.min_rate_bytes > 0 && sample_at == steady_clock::time_point::max())
      sample_at = last_transfer + cfg->limits.min_rate_window;
    deadline = next_deadline();
  }

  steady_clock::time_point next_deadline() const {
    const auto d = std::min(idle_at, sample_at);
    return lingering ? std::min(d, linger_until) : d;
  }

  // The linger after the destination's EOF is over (its time passed, or a drain): stop reading
  // the client, as upstream_to_client does at once on other transports.
  void end_linger() {
    lingering = false;
    upstream_done = true;
    std::error_code ignored;
    client_socket().cancel(ignored);
  }

  // The watchdog's deadline passed; true: the session ends. In the relay it may be a rate sample
  // rather than the idle deadline: a write a peer has not taken min_rate_bytes of over a whole
  // window (delivery_watch, from the kernel's count of acknowledged bytes) ends it as slow.
  bool on_deadline() {
    const auto now = steady_clock::now();
    if (lingering && now >= linger_until) {
      end_linger();
      deadline = std::min(idle_at, sample_at);
      return false;
    }
    if (phase != "relay" || now >= idle_at) {
      on_timeout();
      return true;
    }
    const std::uint64_t need = cfg->limits.min_rate_bytes;
    auto acked = [](tcp::socket& sock) { return read_bytes_acked(sock.native_handle()).value_or(0); };
    bool client_ok = true;
    // A bridged transport's socket is a socketpair, with no count of acknowledged bytes: what
    // the client's HTTP/2 flow control let through counts instead.
    if constexpr (requires { Transport::bridged; })
      client_ok = to_client.on_window(down_writing, down_writing ? client.bytes_delivered() : 0, need);
    else
      client_ok = to_client.on_window(down_writing, down_writing ? acked(client_socket()) : 0, need);
    const bool upstream_ok = to_upstream.on_window(up_writing, up_writing ? acked(upstream.socket()) : 0, need);
    if (!client_ok || !upstream_ok) {
      spdlog::debug("vless {} session {}: slow_transfer towards the {}", listener_name, info->session_id,
                    client_ok ? "destination" : "client");
      slow = true;
      close_sockets();
      return true;
    }
    // Keep sampling while data moves or waits; a whole window without either: idle, no samples
    // until the next transfer.
    const bool active = down_writing || up_writing || last_transfer + cfg->limits.min_rate_window > now;
    sample_at = active ? now + cfg->limits.min_rate_window : steady_clock::time_point::max();
    deadline = next_deadline();
    return false;
  }

  void reject(std::string_view why, std::string detail = {}) {
    reason = close_reason::rejected;
    reject_reason = why;
    reject_detail = std::move(detail);
  }

  // A pending connection's deadlines never pass its pending deadline.
  steady_clock::time_point pending_deadline(steady_clock::time_point phase_deadline) const {
    return std::min(phase_deadline, accepted + cfg->limits.pending_timeout);
  }

  // An I/O step failed: because an eviction, the watchdog or a drain closed the sockets, or on
  // its own.
  void reject_io(std::string_view on_timeout, std::string_view on_failure, std::string detail) {
    if (evicted) return reject("evicted", std::move(detail));
    if (timed_out) return reject(on_timeout, std::move(detail));
    if (drained) return reject("drain");  // not the client's failure ("Operation aborted")
    reject(on_failure, std::move(detail));
  }

  // The destination's side ended the relay. During a drain that is the drain's doing: our own
  // target closes its idle keep-alive connections at once, and says close after a request.
  close_reason upstream_ended(close_reason r) const { return rt.stopping ? close_reason::drain : r; }

  awaitable<bool> handshake() {
    deadline = pending_deadline(accepted + cfg->limits.handshake_timeout);
    if (const auto ec = co_await client.open(transport::open_clock{info->phases, accepted})) {
      reject_io("handshake_timeout", client.open_failure(), ec.message());
      co_return false;
    }
    info->ja4 = client.facts().ja4;  // for the target's Server-Timing
    co_return true;
  }

  // Reads until the VLESS header is complete; leaves the payload that followed it in buf.
  awaitable<std::size_t> read_header() {
    phase = "header";
    deadline = pending_deadline(steady_clock::now() + cfg->limits.header_timeout);
    buf.resize(header_buffer);
    std::size_t used = 0;
    for (;;) {
      auto [ec, n] = co_await client.async_read_some(asio::buffer(buf.data() + used, buf.size() - used),
                                                     as_tuple_awaitable);
      if (ec) {
        // A TLS-level failure (a renegotiation attempt, a bad record) is not a short header.
        const bool tls_failed = !timed_out && !is_eof(ec) && ec.category() == asio::error::get_ssl_category();
        // A transport's own violation (a WebSocket frame) is the reason.
        if constexpr (requires { client.stream_failure(); }) {
          if (!timed_out && !client.stream_failure().empty()) {
            reject(client.stream_failure(), ec.message());
            co_return 0;
          }
        }
        reject_io("header_timeout", tls_failed ? "tls_error" : (used ? "truncated_header" : "no_header"),
                  is_eof(ec) ? "" : ec.message());
        co_return 0;
      }
      if (used == 0) info->phases.first_vless_byte = now_us();
      used += n;
      header_bytes_seen = used;
      auto parsed = vless::parse_request(std::string_view(buf.data(), used));
      if (parsed.invalid()) {
        reject(parsed.reason);
        co_return 0;
      }
      if (parsed.complete()) {
        info->phases.header_complete = now_us();
        header = std::move(parsed.value);
        // Keep only the payload, at the front of buf.
        std::memmove(buf.data(), buf.data() + parsed.consumed, used - parsed.consumed);
        co_return used - parsed.consumed + 1;  // +1: "complete", even with no payload
      }
      if (used == buf.size()) {  // cannot happen with a valid header: it is < 600 bytes
        reject("header_too_large");
        co_return 0;
      }
    }
  }

  // Against the config current now, not the one at accept: a reload since then has the say.
  bool authorize() {
    cfg = rt.live.current();
    auto verdict = admit_request(*cfg, header);
    if (verdict.user != nullptr) info->user = verdict.user->name;
    if (!verdict.admitted()) {
      reject(verdict.reason, std::move(verdict.detail));
      return false;
    }
    const user_config* found = verdict.user;
    // From here on a reload that removes the user ends the session.
    auto id = rt.live.admit(found->uuid, client.get_executor(), [this] {
      user_removed = true;
      close_sockets();
    });
    if (!id) {
      reject("unknown_user", "removed by a reload");
      return false;
    }
    admitted.emplace(rt.live, *id);
    return true;
  }

  // Authorised: the session takes a slot of max_sessions and is no longer pending.
  bool admit() {
    auto slot = session_count::try_acquire(rt.vless_sessions, cfg->limits.max_sessions);
    if (!slot) {
      reject("too_many_sessions");
      return false;
    }
    auto mine = budget->client().sessions.try_take(cfg->limits.max_sessions_per_client);
    if (!mine) {
      reject("too_many_sessions_from_client", std::to_string(cfg->limits.max_sessions_per_client) +
                                                  " sessions open from this address ([limits] max_sessions_per_client)");
      return false;
    }
    counted.emplace(std::move(*slot));
    counted_for_client.emplace(std::move(*mine));
    admission.leave();
    return true;
  }

  // A failed dial as the session's reject: a lookup or connect the watchdog, an eviction or a
  // drain cut is named for that.
  void reject_dial(dial_failure f) {
    if (f.at == dial_failure::step::resolve) return reject_io("resolve_timeout", f.reason, std::move(f.detail));
    if (f.at == dial_failure::step::connect) return reject_io("connect_timeout", f.reason, std::move(f.detail));
    reject(f.reason, std::move(f.detail));
  }

  // The destination through the one dialer (server/upstream_dialer.hpp): its addresses, each
  // allowed by [destinations], then this session's upstream slot, then the connected, registered
  // socket. TCP and UDP alike; false: rejected with the reason.
  awaitable<bool> connect_upstream() {
    phase = "connect";
    deadline = steady_clock::now() + cfg->limits.connect_timeout;
    dest = format_destination(header.dest);
    if (header.dest.type == address_type::domain) phase = "resolve";
    auto allowed = co_await dialer.resolve(header.dest);
    if (!allowed.ok()) {
      if (allowed.failure.at == dial_failure::step::policy) phase = "connect";  // the lookup is done
      reject_dial(std::move(allowed.failure));
      co_return false;
    }
    if (header.dest.type == address_type::domain) info->phases.resolved = now_us();
    phase = "connect";
    cfg = rt.live.current();  // as the dialer's check saw it
    auto taken = budget->take_upstream(cfg->limits.max_upstreams_per_connection, cfg->limits.max_upstreams_per_client);
    if (!taken.slot) {
      reject("client_budget", std::move(taken.detail));
      co_return false;
    }
    upstream_slot = std::move(taken.slot);
    std::optional<dial_failure> failed;
    if (is_udp()) {
      auto& up = udp_up.emplace(client.get_executor());
      asio::ip::udp::endpoint remote;
      failed = dialer.connect(up.socket, *allowed.value, info, up.reg, remote);
    } else {
      failed = co_await dialer.connect(upstream.socket(), *allowed.value, listener->upstream_tcp,
                                       upstream_policy_applied, info, reg, [this] { return timed_out || drained; });
    }
    if (failed) {
      reject_dial(std::move(*failed));
      co_return false;
    }
    info->phases.upstream_connected = now_us();
    co_return true;
  }

  // One send to the destination without waiting: the bytes it took (0 when it would block or
  // failed; the write that follows sees the error).
  std::size_t send_now(const char* data, std::size_t size) {
    ssize_t r;
    do r = ::send(upstream.socket().native_handle(), data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r > 0 ? static_cast<std::size_t>(r) : 0;
  }

  awaitable<void> client_to_upstream(std::size_t pending) {
    // The payload that arrived with the header goes first.
    if (pending > 0) {
      auto [ec, n] = co_await asio::async_write(upstream, asio::buffer(buf.data(), pending), as_tuple_awaitable);
      if (ec) co_return;
      bytes_up += n;
    }
    std::vector<char>().swap(buf);
    bool block_filled = false;  // the last block was filled up before the client ran dry
    for (;;) {
      // upstream_to_client's cancel reaches only a read pending at that moment: one that had
      // already completed would otherwise be followed by a wait that only the idle timeout ends.
      if (upstream_done) co_return;
      // Read every record already here into one block; fill() stops when a read would block.
      std::error_code ec;
      std::size_t n = 0;
      buffer_pool::block block = buffer_pool::get();
      auto fill = [&](std::size_t from) {
        for (std::error_code later; relay_block - from >= tls_record;) {
          const std::size_t k = client.read_now(block.get() + from, relay_block - from, later);
          if (k == 0) {
            if (from == 0) ec = later;  // with bytes in hand, an error shows on the next read
            block_filled = false;
            return from;
          }
          from += k;
        }
        block_filled = true;
        return from;
      };
      // After a full block the sender is likely ahead of us (bulk): try reading before waiting,
      // which costs an epoll_wait and a scheduler pass. After a read that drained everything
      // (interactive traffic), wait first: a speculative read would only be one more EAGAIN.
      // Not once upstream_to_client has cancelled the client's reads: that path waits as before.
      if (block_filled && !upstream_done) n = fill(0);
      if (n == 0 && !ec) {
        // Wait without a buffer (an idle session holds none); then read as above.
        block.reset();
        std::tie(ec) = co_await client.async_wait_readable(as_tuple_awaitable);
        if (!ec) {
          block = buffer_pool::get();
          std::tie(ec, n) = co_await client.async_read_some(asio::buffer(block.get(), relay_block), as_tuple_awaitable);
          if (!ec) n = fill(n);
        }
      }
      if (ec) {
        lingering = false;  // the client closed (or failed): no wait for it is left
        std::error_code ignored;
        if (is_eof(ec)) {
          // Half-close: the destination sees EOF, and its answer still flows back.
          client_closed = true;
          upstream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        } else {
          if (reason == close_reason::client_eof) reason = close_reason::client_error;
          close_upstream();
        }
        co_return;
      }
      touch();
      // A full block: the client may have more read ahead. The send asio would try first, made
      // here; a block the destination does not take at once may wait for as long as it does not
      // read, and what the client's transport read ahead leaves its pooled block meanwhile: a
      // stalled session holds this block only (issue 23 item 10).
      std::size_t sent = 0;
      if (block_filled) {
        sent = send_now(block.get(), n);
        if (sent < n) client.release_read_ahead();
      }
      if (sent < n) {
        up_writing = true;
        auto [wec, wn] = co_await asio::async_write(upstream, asio::buffer(block.get() + sent, n - sent),
                                                    transfer_all_unchunked{}, as_tuple_awaitable);
        up_writing = false;
        if (wec) {
          // While lingering the destination has ended already: its EOF stays the reason.
          if (!upstream_done && !lingering) reason = upstream_ended(close_reason::upstream_error);
          lingering = false;
          std::error_code ignored;
          client_socket().cancel(ignored);
          co_return;
        }
        sent += wn;
      }
      bytes_up += sent;
    }
  }

  awaitable<void> upstream_to_client() {
    bool header_sent = false;
    bool destination_ended = false;  // its EOF or error, not a failed write to the client
    for (;;) {
      // Wait without a buffer (an idle session holds none), then read into a pooled block.
      auto [ec] = co_await upstream.socket().async_wait(tcp::socket::wait_read, as_tuple_awaitable);
      auto block = buffer_pool::get();
      char* const down = block.get();
      // The VLESS response header leaves in the same TLS record as the first upstream bytes.
      down[0] = vless::response_header[0];
      down[1] = vless::response_header[1];
      std::size_t n = 0;
      if (!ec)
        std::tie(ec, n) = co_await upstream.async_read_some(asio::buffer(down + header_room, relay_block - header_room),
                                                            as_tuple_awaitable);
      if (ec) {
        if (reason == close_reason::client_eof && !client_closed)
          reason = upstream_ended(is_eof(ec) ? close_reason::upstream_eof : close_reason::upstream_error);
        if (!header_sent) {
          // Nothing came back at all: the client still gets its response header.
          auto [wec, wn] = co_await asio::async_write(client, asio::buffer(down, header_room),
                                                      as_tuple_awaitable);
          (void)wec;
          (void)wn;
        }
        destination_ended = true;
        break;
      }
      touch();
      if (info->phases.first_upstream_byte < 0) info->phases.first_upstream_byte = now_us();
      const char* start = header_sent ? down + header_room : down;
      const std::size_t len = header_sent ? n : n + header_room;
      if (!header_sent) info->phases.first_client_byte = now_us();
      down_writing = true;
      auto [wec, wn] =
          co_await asio::async_write(client, asio::buffer(start, len), transfer_all_unchunked{}, as_tuple_awaitable);
      down_writing = false;
      if (wec) {
        reason = close_reason::client_error;
        break;
      }
      header_sent = true;
      bytes_down += n;
    }
    // A WebSocket or HTTPUpgrade client cannot be told of a half-close: v2ray's and Xray's ws
    // clients read our close frame as an error and drop the answer they hold (issue 28). As their
    // own servers do, wait for the client to close first, reading on, for [limits] close_linger_ms.
    if constexpr (requires { Transport::lingers_after_upstream_eof; }) {
      if (destination_ended && !client_closed && !rt.stopping && cfg->limits.close_linger.count() > 0) {
        lingering = true;
        linger_until = steady_clock::now() + cfg->limits.close_linger;
        deadline = next_deadline();
        co_return;
      }
    }
    // The destination is done (or the client is gone): stop reading the client too.
    upstream_done = true;
    std::error_code ignored;
    client_socket().cancel(ignored);
  }

  awaitable<void> run() {
    if (!co_await handshake()) co_return;
    std::size_t got = co_await read_header();
    if (got == 0 || !authorize() || !admit()) co_return;
    std::size_t pending = got - 1;
    if (!start_flow(*this, pending)) co_return;  // Vision (server/vision_session.hpp)
    if (is_mux()) {
      // No destination of its own: each sub-connection dials one (server/mux_session.hpp).
      dest = header.dest.address;  // vless::mux_domain
      phase = "relay";
      touch();
      mux = std::make_unique<mux_relay<session>>(*this, pending);
      co_await mux->run();
    } else if (is_sing_mux()) {
      dest = format_destination(header.dest);
      phase = "relay";
      touch();
      sing_mux = std::make_unique<sing_mux_relay<session>>(*this, pending);
      co_await sing_mux->run();
    } else {
      if (!co_await connect_upstream()) co_return;
      phase = "relay";
      touch();
      if (is_udp())
        co_await (udp_client_to_upstream(*this, pending) && udp_upstream_to_client(*this));
      else
        co_await (client_to_upstream(pending) && upstream_to_client());
    }
    phase = "close";
    if (!timed_out && client_socket().is_open()) {
      deadline = steady_clock::now() + shutdown_grace;
      auto [ec] = co_await client.async_shutdown(as_tuple_awaitable);
      (void)ec;
    }
  }

  void finish() {
    info->phases.closed = now_us();
    if (client_socket().is_open()) tcpi = read_tcp_info(client_socket().native_handle());
    close_sockets();
    // How the relay ended decides the reason; cutting the bounded TLS shutdown after it does not
    // (a client that ignores close_notify was logged "timeout").
    const bool cut = !shutdown_cut && reason != close_reason::rejected;
    if (cut && timed_out) {
      reason = close_reason::timeout;
    } else if (cut && drained) {
      reason = close_reason::drain;
    } else if (user_removed && reason != close_reason::rejected) {
      reason = close_reason::user_removed;
    } else if (slow) {
      reason = close_reason::slow_transfer;
    }
    // The session's slots go back before its line is written: a client that saw the line (or
    // the close) may open the next session at once and find the slot free.
    counted_for_client.reset();
    counted.reset();
    if (reason == close_reason::rejected) {
      log_reject();
    } else {
      log_session();
    }
  }

  void log_reject() {
    // From the transport, not info: a handshake cut by its deadline may have had its ClientHello.
    const std::string ja4 = client.facts().ja4;
    const vless_reject_event event{.session = info->session_id,
                                   .listener = listener_name,
                                   .client = info->client,
                                   .reason = reject_reason,
                                   .phase = phase,
                                   .bytes_seen = header_bytes_seen,
                                   .detail = reject_detail,
                                   .user = info->user,
                                   .dest = dest,
                                   .duration_us = info->phases.closed.get(),
                                   .ja4 = ja4};
    rt.events.emit(event);
    spdlog::debug("vless {} session {} from {} rejected: {} ({})", listener_name, info->session_id,
                  info->client, reject_reason, reject_detail);
    note_refusal(rt, reject_reason,
                 fmt::format("{} on {}{}{}", info->client, listener_name, reject_detail.empty() ? "" : ": ", reject_detail));
  }

  void log_session() {
    const auto& p = info->phases;
    const bool stall = p.tls_done >= 0 && p.header_complete >= 0 &&
                       p.header_complete - p.tls_done >= stall_threshold_us;
    const transport::facts t = client.facts();
    const vless_session_event event{.session = info->session_id,
                                    .listener = listener_name,
                                    .user = info->user,
                                    .client = info->client,
                                    .dest = dest,
                                    .cmd = is_mux() || sing_mux ? "mux" : (is_udp() ? "udp" : "tcp"),
                                    .tls_version = t.tls_version,
                                    .cipher = t.cipher,
                                    .sni = t.sni,
                                    .alpn = t.alpn,
                                    .ja4 = t.ja4,
                                    .transport = t.transport,
                                    .early_data = t.early_data,
                                    .policy = policy_at_accept,
                                    .upstream_policy = upstream_policy_applied,
                                    .generation = generation_at_accept,
                                    .phases = &p,
                                    .stall_suspected = stall,
                                    .tcp_info = tcpi,
                                    .bytes_up = bytes_up,
                                    .bytes_down = bytes_down,
                                    .packets_up = udp_up ? std::optional(udp_up->packets_up) : std::nullopt,
                                    .packets_down = udp_up ? std::optional(udp_up->packets_down) : std::nullopt,
                                    .subs = mux ? std::optional(mux->subs())
                                                : sing_mux ? std::optional(sing_mux->subs()) : std::nullopt,
                                    .subs_refused = mux ? std::optional(mux->refused())
                                                        : sing_mux ? std::optional(sing_mux->refused()) : std::nullopt,
                                    .mux_error = mux ? mux->mux_error()
                                                     : sing_mux ? sing_mux->mux_error() : std::string_view(),
                                    .flow = header.flow,
                                    .vision = vision_of(client),
                                    .sing_mux = sing_mux ? sing_mux->protocol() : std::string_view(),
                                    .close_reason = to_string(reason)};
    rt.events.emit(event);
    if (stall) {
      spdlog::warn("vless {} session {} from {}: {:.1f} ms between TLS done and VLESS header: suspected "
                   "Nagle/delayed-ACK stall (quickack={})",
                   listener_name, info->session_id, info->client,
                   static_cast<double>(p.header_complete - p.tls_done) / 1000.0,
                   to_string(policy_at_accept.quickack));
    }
  }
};

// make is taken by value: the coroutine starts after the caller's temporaries are gone.
template <class Transport, class Make>
awaitable<void> serve(runtime& rt, session_start start, tcp::socket socket, Make make) {
  session<Transport> s(rt, start, std::move(socket), make);
  // A bridged transport (a gRPC stream's socketpair) has no TCP options; its connection applied them.
  if constexpr (!requires { Transport::bridged; }) {
    if (auto err = apply_on_open(s.client_socket().native_handle(), s.policy_at_accept))
      spdlog::warn("vless {}: setsockopt: {}", s.listener_name, err.message());
  }
  {
    const connection_registration registered(rt.connections, s.client.get_executor(), [&s](bool force) {
      // A client that has not sent its request yet (handshake or header in progress) goes at
      // once; a relay has no request boundary: it may run until the drain deadline.
      // A session lingering after its destination's EOF has nothing left to relay: its wait ends.
      if (s.lingering) {
        s.end_linger();
        return;
      }
      if (!force && s.phase != "tls" && s.phase != "header") return;
      s.shutdown_cut = s.phase == "close";
      s.drained = true;
      s.close_sockets();
    });
    auto evict = [&s] {
      s.evicted = true;
      s.close_sockets();
    };
    if (!s.admission.arm(evict)) evict();  // evicted before it started: the handshake fails at once
    s.deadline = s.pending_deadline(s.accepted + s.cfg->limits.handshake_timeout);
    // clang-tidy 14 reports the moved parameter on the next line, in a function template
    // coroutine only; nothing on that line names it.
    // NOLINTNEXTLINE(bugprone-use-after-move)
    co_await (s.run() || watchdog(s.deadline, [&s] { return s.on_deadline(); }));
    // Mux sub-connections end with the session, before its line (which counts them).
    if (s.mux) co_await s.mux->join();
    if (s.sing_mux) co_await s.sing_mux->join();
  }
  s.finish();
}

}  // namespace vlessbench::vless_server::detail
