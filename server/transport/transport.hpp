#pragma once
// The seam between a VLESS session and the bytes beneath it (DESIGN.md, docs/sessions.md
// "Transports"). A session (server/vless_server.cpp) is a template over its client transport;
// raw TLS (tls_stream.hpp) is one, and WebSocket, HTTPUpgrade and gRPC are its siblings in this
// folder. A transport owns the client's TCP connection and everything up to the first byte of
// the VLESS stream: the TLS handshake, an HTTP upgrade, early data, framing. The session sees
// a plain byte stream and never which transport carries it, except in the log.
//
// What a transport T provides (checked by the client_transport concept below):
//   open(clock) -> awaitable<error_code>   the TLS handshake and whatever the transport adds
//                                           (an upgrade, a preface), stamping the phases it
//                                           reaches on clock
//   failure()                               the one failure accessor: the reject reason of the
//                                           transport's own failure, if it failed. After a failed
//                                           open(), always one when open() can fail
//                                           ("tls_handshake_failed", "wrong_path"); after a
//                                           failed read, a violation of the transport's rules
//                                           (a WebSocket frame, gun framing), or none when the
//                                           failure was not the transport's (the session names
//                                           it: tls_error, truncated_header ...)
//   async_read_some / async_write_some      the VLESS stream (Asio AsyncStream), so
//                                           asio::async_write works on it
//   async_wait_readable(token)              completes when a read would make progress; holds
//                                           no buffer while waiting (an idle session holds none)
//   read_now(data, size, ec)                one read that never waits: bytes, or 0 when it would
//                                           block (ec clear) or failed (ec set); what it reads
//                                           ahead of the caller is bounded by size
//   release_read_ahead()                    the caller stops reading for a while (its buffer is
//                                           full): bytes read ahead leave any pooled block
//   async_shutdown(token)                   the transport's orderly close (close_notify, a
//                                           close frame); the caller bounds it
//   socket()                                the TCP connection beneath: policy, tcp_info, close
//   facts()                                 what the log says of the transport
//   can                                     (static constexpr abilities) what it can do beyond
//                                           the byte stream (below), each ability with the
//                                           members it brings
#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "core/log/access_events.hpp"
#include "core/net/asio_compat.hpp"
#include "core/wire/uuid.hpp"
#include "core/wire/session_info.hpp"
#include "core/wire/transport_spec.hpp"

namespace vlessbench::transport {

// Stamps a session's phases (microseconds since accept) as a transport's opening steps complete.
struct open_clock {
  session_phases& phases;
  std::chrono::steady_clock::time_point accepted;
  void stamp(phase_us session_phases::*phase) const {
    phases.*phase =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - accepted).count();
  }
};

// What the vless.session line records of the transport, read once when the session ends.
struct facts {
  std::string_view transport;  // to_string(transport_kind): "tls", "ws", "httpupgrade", "grpc" (over TLS or plain TCP:
                               // tls_version says)
  std::string tls_version;
  std::string cipher;
  std::string sni;
  std::string alpn;
  std::string ja4;               // the client's TLS fingerprint (core/wire/ja4.hpp); "" without TLS
  std::uint64_t early_data = 0;  // bytes of the VLESS stream that came with the upgrade request
  std::string groups;            // the ClientHello's supported groups, comma-separated names ("" without TLS)
  std::string key_shares;        // its key shares, likewise ("X25519MLKEM768,X25519")
  // xhttp over HTTP/2: the connection carried an earlier session (XMUX); unset elsewhere
  std::optional<bool> reused;
  // a refused REALITY ClientHello: its relay to the target (end "closed" when the session closed
  // the client under it; the session's log line names why)
  std::optional<fallback_facts> fallback;
};

// What a transport can do beyond the byte stream. Every transport states all of it (a
// `static constexpr abilities can`), and a session asks with `if constexpr (T::can.x)`.
struct abilities {
  // Not a TCP connection of its own (a gRPC stream's socketpair): no socket options to apply and
  // no kernel count of acknowledged bytes; bytes_delivered() counts what the client's flow control
  // let through instead (the [limits] min_rate rule's count).
  bool bridged = false;
  // No half-close in the transport (WebSocket, HTTPUpgrade): after the destination's EOF the
  // session reads on until the client closes ([limits] close_linger_ms), as v2ray's and Xray's
  // servers do.
  bool lingers_after_upstream_eof = false;
  // XTLS Vision (vision_stream.hpp): start_vision() once the header names the flow, the
  // optional reject reason of the padding that came with the header; vision() says it is on,
  // vision_facts_now() what the log line records of it.
  bool vision = false;
};

template <class T>
concept counts_delivered = requires(const T& t) {
  { t.bytes_delivered() } -> std::convertible_to<std::uint64_t>;
};

template <class T>
concept runs_vision = requires(T& t, const T& ct, const uuid_bytes& id, char* pending, std::size_t& n) {
  { t.start_vision(id, pending, n, std::size_t{}) } -> std::same_as<std::optional<std::string_view>>;
  { ct.vision() } -> std::same_as<bool>;
  { ct.vision_facts_now() } -> std::same_as<vision_facts>;
};

template <class T>
concept client_transport = requires(T& t, const open_clock& clock, char* data, std::size_t size, std::error_code& ec) {
  { T::can } -> std::convertible_to<abilities>;
  { t.open(clock) } -> std::same_as<awaitable<std::error_code>>;
  { t.failure() } -> std::same_as<std::optional<std::string_view>>;
  { t.read_now(data, size, ec) } -> std::same_as<std::size_t>;
  t.release_read_ahead();
  { t.socket() } -> std::same_as<tcp::socket&>;
  { t.facts() } -> std::same_as<facts>;
  t.get_executor();
  t.async_read_some(asio::mutable_buffer(), as_tuple_awaitable);
  t.async_write_some(asio::const_buffer(), as_tuple_awaitable);
  t.async_wait_readable(as_tuple_awaitable);
  t.async_shutdown(as_tuple_awaitable);
}
&&(!T::can.bridged || counts_delivered<T>)&&(!T::can.vision || runs_vision<T>);

}  // namespace vlessbench::transport
