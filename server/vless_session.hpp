#pragma once
// A VLESS session over any client transport (server/transport/transport.hpp): one coroutine owns
// the client connection and the upstream socket, TLS (or another transport's) opening -> VLESS
// header -> admission (server/admission.hpp) -> upstream connect -> relay -> one log line.
// A template, so each transport's session is compiled for it with no virtual call in the relay;
// server/vless_server.cpp picks the transport per listener. What does not touch the transport
// (ids, route info, slots, counters, deadlines, close reason, the log line) is the non-template
// session_core (server/session_core.hpp) it derives from.
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/log/access_events.hpp"
#include "core/log/logging.hpp"
#include "core/net/policy_stream.hpp"
#include "core/net/tcp_info.hpp"
#include "core/net/watchdog.hpp"
#include "core/wire/vless_codec.hpp"
#include "server/admission.hpp"
#include "server/buffer_pool.hpp"
#include "server/mux_session.hpp"
#include "server/relay_common.hpp"
#include "server/session_core.hpp"
#include "server/sing_mux_session.hpp"
#include "server/transport/transport.hpp"
#include "server/udp_relay.hpp"
#include "server/upstream_dialer.hpp"
#include "server/vision_session.hpp"
#include "server/vless_server.hpp"

namespace vlessbench::vless_server::detail {

// A session's client transport as the sub-connection engine's client_stream (server/sub_engine.hpp): the one
// place a multiplexed session's I/O meets the transport's type.
template <class Session>
class client_stream_of final : public client_stream {
 public:
  explicit client_stream_of(Session& s) : s_(s) {}
  awaitable<io_result> read_some(asio::mutable_buffer into) override {
    auto [ec, n] = co_await s_.client.async_read_some(into, as_tuple_awaitable);
    co_return io_result{ec, n};
  }
  awaitable<io_result> write_all(asio::const_buffer from) override {
    auto [ec, n] = co_await asio::async_write(s_.client, from, transfer_all_unchunked{}, as_tuple_awaitable);
    co_return io_result{ec, n};
  }
  void cancel() override {
    std::error_code ignored;
    s_.client_socket().cancel(ignored);
  }

 private:
  Session& s_;
};

// One VLESS session over a client transport (server/transport/transport.hpp): raw TLS,
// WebSocket or HTTPUpgrade; the session never knows which.
template <transport::client_transport Transport>
struct session : session_core {
  Transport client;
  policy_stream upstream;
  std::optional<route_registration> reg;
  std::optional<udp_upstream> udp_up;         // command 2 (UDP): the socket to the destination
  std::unique_ptr<client_stream> mux_client;  // the client as a multiplexed session's relay reads and writes it
  std::unique_ptr<mux_relay> mux;             // command 3 (Mux.Cool): its sub-connections
  std::unique_ptr<sing_mux_relay> sing_mux;   // sp.mux.sing-box.arpa: its streams, subs as Mux.Cool's are
  upstream_dialer dialer;                     // the destination's lookup and connect (server/upstream_dialer.hpp)

  // Takes everything out of start; make(listener, tls context, socket) builds the transport.
  template <class Make>
  session(runtime& r, session_start& start, tcp::socket s, Make&& make)
      : session_core(r, start),
        client(make(*listener, *tls_ctx, std::move(s))),
        upstream(tcp::socket(client.get_executor()), &listener->upstream_tcp),
        dialer(r, client.get_executor()) {
    info->transport = std::string(client.facts().transport);
  }

  tcp::socket& client_socket() { return client.socket(); }

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
    end_by(session_ending::cause::timeout);
    close_sockets();
  }

  // The destination's side is done: the client's reads stop (its pending read is cancelled, and
  // a reader checks client_reads_stopped() before it waits again).
  void stop_client_reads() {
    upstream_done = true;
    std::error_code ignored;
    client_socket().cancel(ignored);
  }

  // The linger after the destination's EOF is over (its time passed, or a drain): stop reading
  // the client, as upstream_to_client does at once on other transports.
  void end_linger() {
    lingering = false;
    stop_client_reads();
  }

  // The connection set's drain: a client that has not sent its request yet (handshake or header
  // in progress) goes at once; a relay has no request boundary: it may run until the drain
  // deadline (force). A session lingering after its destination's EOF has nothing left to relay:
  // its wait ends.
  void on_drain(bool force) {
    if (lingering) {
      end_linger();
      return;
    }
    if (!force && phase() != session_phase::tls && phase() != session_phase::header) return;
    end_by(session_ending::cause::drain);
    close_sockets();
  }

  // Closed while pending, to admit a newer connection.
  void on_evicted() {
    end_by(session_ending::cause::evicted);
    close_sockets();
  }

  // Before run(): the client socket's options (a bridged transport's connection applied them),
  // the eviction armed (one evicted before it started fails its handshake at once) and the
  // first deadline. The watchdog's deadline is returned.
  watchdog_deadline& start_watch() {
    if constexpr (!Transport::can.bridged) {
      if (auto err = apply_on_open(client_socket().native_handle(), policy_at_accept))
        spdlog::warn("vless {}: setsockopt: {}", listener_name, err.message());
    }
    if (!admission.arm([this] { on_evicted(); })) on_evicted();
    deadline = pending_deadline(accepted + cfg->limits.handshake_timeout);
    return deadline;
  }

  // Mux sub-connections end with the session, before its line (which counts them).
  awaitable<void> join_subs() {
    if (mux) co_await mux->join();
    if (sing_mux) co_await sing_mux->join();
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
    if (phase() != session_phase::relay || now >= idle_at) {
      on_timeout();
      return true;
    }
    auto acked = [](tcp::socket& sock) { return read_bytes_acked(sock.native_handle()).value_or(0); };
    std::uint64_t client_delivered = 0;
    // A bridged transport's socket is a socketpair, with no count of acknowledged bytes: what
    // the client's HTTP/2 flow control let through counts instead.
    if constexpr (Transport::can.bridged)
      client_delivered = down_writing ? client.bytes_delivered() : 0;
    else
      client_delivered = down_writing ? acked(client_socket()) : 0;
    if (rate_sample_failed(now, client_delivered, up_writing ? acked(upstream.socket()) : 0)) {
      close_sockets();
      return true;
    }
    return false;
  }

  awaitable<bool> handshake() {
    deadline = pending_deadline(accepted + cfg->limits.handshake_timeout);
    if (const auto ec = co_await client.open(transport::open_clock{info->phases, accepted})) {
      reject_io(reject_code::handshake_timeout, client.failure().value_or(std::string_view{}), ec.message());
      co_return false;
    }
    info->ja4 = client.facts().ja4;  // for the target's Server-Timing
    co_return true;
  }

  // Reads until the VLESS header is complete; leaves the payload that followed it in buf.
  awaitable<std::size_t> read_header() {
    enter(session_phase::header);
    deadline = pending_deadline(steady_clock::now() + cfg->limits.header_timeout);
    buf.resize(header_buffer);
    std::size_t used = 0;
    for (;;) {
      auto [ec, n] =
          co_await client.async_read_some(asio::buffer(buf.data() + used, buf.size() - used), as_tuple_awaitable);
      if (ec) {
        // A TLS-level failure (a renegotiation attempt, a bad record) is not a short header.
        const bool tls_failed = !timed_out() && !is_eof(ec) && ec.category() == asio::error::get_ssl_category();
        // A transport's own violation (a WebSocket frame) is the reason.
        if (const auto failed = client.failure(); failed && !timed_out()) {
          reject(*failed, ec.message());
          co_return 0;
        }
        reject_io(reject_code::header_timeout,
                  to_string(tls_failed ? reject_code::tls_error
                                       : (used ? reject_code::truncated_header : reject_code::no_header)),
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
        reject(reject_code::header_too_large);
        co_return 0;
      }
    }
  }

  // Against the config current now, not the one at accept: a reload since then has the say.
  bool authorize() {
    cfg = rt.live.current();
    auto verdict = admit_request(*cfg, header);
    if (verdict.user != nullptr) info->user = verdict.user->name;
    if (verdict.refused) {
      reject(verdict.refused->reason, std::move(verdict.refused->detail));
      return false;
    }
    const user_config* found = verdict.user;
    // From here on a reload that removes the user ends the session.
    auto id = rt.live.admit(found->uuid, client.get_executor(), [this] {
      end_by(session_ending::cause::user_removed);
      close_sockets();
    });
    if (!id) {
      reject(reject_code::unknown_user, "removed by a reload");
      return false;
    }
    admitted.emplace(rt.live, *id);
    return true;
  }

  // The destination through the one dialer (server/upstream_dialer.hpp): its addresses, each
  // allowed by [destinations], then this session's upstream slot, then the connected, registered
  // socket. TCP and UDP alike; false: rejected with the reason.
  awaitable<bool> connect_upstream() {
    enter(session_phase::connect);
    deadline = steady_clock::now() + cfg->limits.connect_timeout;
    dest = format_destination(header.dest);
    if (header.dest.type == address_type::domain) enter(session_phase::resolve);
    auto allowed = co_await dialer.resolve(header.dest);
    if (!allowed.ok()) {
      if (allowed.failure.at == dial_failure::step::policy) enter(session_phase::connect);  // the lookup is done
      reject_dial(std::move(allowed.failure));
      co_return false;
    }
    if (header.dest.type == address_type::domain) info->phases.resolved = now_us();
    enter(session_phase::connect);
    cfg = rt.live.current();  // as the dialer's check saw it
    auto taken = budget->take_upstream(cfg->limits.max_upstreams_per_connection, cfg->limits.max_upstreams_per_client);
    if (!taken.slot) {
      reject(reject_code::client_budget, std::move(taken.detail));
      co_return false;
    }
    upstream_slot = std::move(taken.slot);
    std::optional<dial_failure> failed;
    if (is_udp()) {
      auto& up = udp_up.emplace(client.get_executor());
      asio::ip::udp::endpoint remote;
      failed = dialer.connect(up.socket, *allowed.value, info, up.reg, remote);
    } else {
      failed =
          co_await dialer.connect(upstream.socket(), *allowed.value, listener->upstream_tcp, upstream_policy_applied,
                                  info, reg, [this] { return timed_out() || ended_by(session_ending::cause::drain); });
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

  // size: the upload relay's hot loop, kept as one coroutine: a step of its own per block would be a
  // coroutine frame per block on the path every byte takes.
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
        destination_ends(is_eof(ec) ? close_reason::upstream_eof : close_reason::upstream_error);
        if (!header_sent) {
          // Nothing came back at all: the client still gets its response header.
          auto [wec, wn] = co_await asio::async_write(client, asio::buffer(down, header_room), as_tuple_awaitable);
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
    if constexpr (Transport::can.lingers_after_upstream_eof) {
      if (destination_ended && !client_closed && !rt.stopping && cfg->limits.close_linger.count() > 0) {
        lingering = true;
        linger_until = steady_clock::now() + cfg->limits.close_linger;
        deadline = next_deadline();
        co_return;
      }
    }
    // The destination is done (or the client is gone): stop reading the client too.
    stop_client_reads();
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
      enter(session_phase::relay);
      touch();
      mux_client = std::make_unique<client_stream_of<session>>(*this);
      mux = std::make_unique<mux_relay>(*this, *mux_client, client.get_executor(), pending);
      co_await mux->run();
    } else if (is_sing_mux()) {
      dest = format_destination(header.dest);
      enter(session_phase::relay);
      touch();
      mux_client = std::make_unique<client_stream_of<session>>(*this);
      sing_mux = std::make_unique<sing_mux_relay>(*this, *mux_client, client.get_executor(), pending);
      co_await sing_mux->run();
    } else {
      if (!co_await connect_upstream()) co_return;
      enter(session_phase::relay);
      touch();
      if (is_udp())
        co_await (udp_client_to_upstream(*this, pending) && udp_upstream_to_client(*this));
      else
        co_await (client_to_upstream(pending) && upstream_to_client());
    }
    enter(session_phase::close);
    if (!timed_out() && client_socket().is_open()) {
      deadline = steady_clock::now() + shutdown_grace;
      auto [ec] = co_await client.async_shutdown(as_tuple_awaitable);
      (void)ec;
    }
  }

  void finish() {
    info->phases.closed = now_us();
    if (client_socket().is_open()) tcpi = read_tcp_info(client_socket().native_handle());
    close_sockets();
    const transport::facts t = client.facts();
    relay_summary r;
    r.mux = is_mux() || sing_mux;
    if (udp_up) {
      r.packets_up = udp_up->packets_up;
      r.packets_down = udp_up->packets_down;
    }
    if (mux) {
      r.subs = mux->subs();
      r.subs_refused = mux->refused();
      r.mux_error = mux->mux_error();
    } else if (sing_mux) {
      r.subs = sing_mux->subs();
      r.subs_refused = sing_mux->refused();
      r.mux_error = sing_mux->mux_error();
      r.sing_mux = sing_mux->protocol();
    }
    r.vision = vision_of(client);
    session_core::finish(t, r);
  }
};

// make is taken by value: the coroutine starts after the caller's temporaries are gone.
template <class Transport, class Make>
awaitable<void> serve(runtime& rt, session_start start, tcp::socket socket, Make make) {
  session<Transport> s(rt, start, std::move(socket), make);
  {
    const connection_registration registered(rt.connections, s.client.get_executor(),
                                             [&s](bool force) { s.on_drain(force); });
    watchdog_deadline& deadline = s.start_watch();
    // clang-tidy 14 reports the moved parameter on the next line, in a function template
    // coroutine only; nothing on that line names it.
    // NOLINTNEXTLINE(bugprone-use-after-move)
    co_await (s.run() || watchdog(deadline, [&s] { return s.on_deadline(); }));
    co_await s.join_subs();
  }
  s.finish();
}

}  // namespace vlessbench::vless_server::detail
