#pragma once
// One writer per access-log event (DESIGN.md §3, docs/sessions.md "Log events"): a call site
// fills the event's struct and this file spells the line, so each event's fields and their order
// are named in one place. Empty strings and absent optionals are left out of the line.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config/config.hpp"
#include "core/wire/probe_result.hpp"
#include "core/wire/session_info.hpp"
#include "core/net/tcp_info.hpp"

namespace vlessbench {

// A refused REALITY ClientHello's relay to the listener's target (docs/configuration.md
// "REALITY"): what a prober was served instead of the listener.
struct fallback_facts {
  std::int64_t duration_us = 0;  // from the target dial to the relay's end
  std::uint64_t bytes_up = 0;    // client -> target, the ClientHello included
  std::uint64_t bytes_down = 0;  // target -> client
  std::string_view end;          // "target_down", "client_eof", "target_eof", "deadline", ...
};

// A connection refused before relaying.
struct vless_reject_event {
  std::optional<std::uint64_t> session;  // absent when refused at accept, before a session existed
  std::string_view listener;
  std::string_view client;
  std::string_view reason;
  std::string_view phase;
  std::uint64_t bytes_seen = 0;  // header bytes received
  std::string_view detail;
  std::string_view user;
  std::string_view dest;
  std::optional<std::int64_t> duration_us;
  std::string_view ja4;     // the client's TLS fingerprint, once its ClientHello arrived
  std::string_view groups;  // its supported groups and key shares, comma-separated (arrays in the line)
  std::string_view key_shares;
  std::optional<fallback_facts> fallback;  // a refused REALITY ClientHello relayed to the target
};
std::string format_event(const vless_reject_event& e);

// A VLESS session that was admitted, at its close (a refused one is a vless_reject_event).
// A Vision session's (flow xtls-rprx-vision, docs/sessions.md "Vision"): when direct copy began
// each way, the padding each way, what its detection saw inside, and a broken padding's reason.
struct vision_facts {
  std::int64_t direct_up_us = -1;                  // client -> server went beneath the TLS (µs since accept)
  std::int64_t direct_down_us = -1;                // server -> client
  std::uint64_t padding_up = 0, padding_down = 0;  // padding bytes, with frame headers and UUID
  std::uint64_t frames_up = 0;                     // the client's padded frames
  std::string_view inner;                          // "tls1.3", "tls1.2", "tls" (a ClientHello only), "none"
  std::string_view error;                          // the client's padding broke the format (a reason), else empty
};

struct vless_session_event {
  std::uint64_t session = 0;
  std::string_view listener;
  std::string_view user;
  std::string_view client;
  std::string_view dest;
  std::string_view cmd;  // "tcp", "udp", "mux"
  std::string_view tls_version, cipher, sni, alpn;
  std::string_view ja4;          // the client's TLS fingerprint (core/wire/ja4.hpp)
  std::string_view groups;       // its ClientHello's supported groups, comma-separated (logged as an array)
  std::string_view key_shares;   // its key shares, likewise
  std::string_view transport;    // "tls" (left out: the lines of raw TLS stay as they were), "ws", ...
  std::uint64_t early_data = 0;  // bytes of the VLESS stream that came with the upgrade request
  std::optional<bool> reused;    // xhttp over HTTP/2: its connection carried an earlier session
  std::string emulate;           // the listener's emulated path at accept ("delay 40 ms"); empty: none
  tcp_policy policy;             // the listener's policies at accept, with their generation
  tcp_policy upstream_policy;
  std::uint64_t generation = 0;
  const session_phases* phases = nullptr;  // required; "resolved" only when reached
  bool stall_suspected = false;
  // xhttp packet-up: the header wait was the client's POST spacing (wait_is_post_spacing), which
  // is then no suspected stall.
  bool post_spacing = false;
  std::optional<tcp_info_snapshot> tcp_info;  // the client connection's, at close
  std::uint64_t bytes_up = 0;                 // client -> destination payload
  std::uint64_t bytes_down = 0;               // destination -> client payload
  // cmd "udp": datagrams each way (bytes_* count their payload, without the length prefixes)
  std::optional<std::uint64_t> packets_up, packets_down;
  // cmd "mux": sub-connections opened, New frames refused (each refusal has a vless.sub line up to
  // a per-session budget), and the frame error that ended the session, if one did.
  std::optional<std::uint64_t> subs, subs_refused;
  std::string_view mux_error;
  std::string_view flow;               // the request's flow ("xtls-rprx-vision"), else empty
  std::optional<vision_facts> vision;  // with flow xtls-rprx-vision
  std::string_view sing_mux;           // a sing-mux session: its stream protocol ("smux", "yamux")
  std::string_view close_reason;
};
std::string format_event(const vless_session_event& e);

// One Mux.Cool sub-connection of a cmd "mux" session (docs/sessions.md "Mux"), at its close; or a
// New frame refused / a frame for no live sub-connection (close_reason "rejected" with error).
struct vless_sub_event {
  std::uint64_t session = 0;  // the parent vless.session
  std::uint32_t sub = 0;      // route_info::sub; 0 for a frame refused before a sub-connection existed
  std::uint16_t mux_id = 0;   // the id on the wire
  std::string_view listener;
  std::string_view user;
  std::string_view net;                        // "tcp", "udp"; empty when the frame named none
  std::string_view dest;                       // the New frame's target
  bool xudp = false;                           // a UDP sub-connection in XUDP form (global id, per-packet addresses)
  std::uint64_t bytes_up = 0, bytes_down = 0;  // payload, client -> destination and back
  std::optional<std::uint64_t> packets_up, packets_down, packets_dropped;  // net "udp"
  std::optional<std::int64_t> connect_us;  // New -> upstream connected (TCP) / socket ready (UDP)
  std::int64_t duration_us = 0;            // New -> close
  std::string_view close_reason;           // "client_end", "upstream_eof", "upstream_error", "rejected", ...
  std::string_view error;                  // why, for an error close or a refusal ("dest_not_allowed", ...)
  std::string_view detail;
};
std::string format_event(const vless_sub_event& e);

// An XHTTP connection that opened no session of its own (it carried uplink requests of sessions
// whose GET came on another connection: packet-up's POSTs, a stream-up POST), at its close: the id
// it took at accept ends with this line. Event name "xhttp.connection".
struct xhttp_connection_event {
  std::uint64_t session = 0;  // the id the connection took at accept
  std::string_view listener;
  std::string_view client;
  std::string_view http;               // "1.1" or "2"
  std::optional<std::uint64_t> posts;  // uplink POSTs it carried (HTTP/1.1)
};
std::string format_event(const xhttp_connection_event& e);

// A reload's outcome: error when it failed, the number of changes when it took.
struct config_reload_event {
  bool ok = false;
  std::uint64_t generation = 0;
  std::string_view error;
  std::optional<std::uint64_t> changes;
};
std::string format_event(const config_reload_event& e);

// A request the target answered (or refused: no method/path, status 400/431 and an error).
struct http_request_event {
  std::string_view listener;
  std::string_view peer;
  const route_info* route = nullptr;  // the relaying session; nullptr: direct
  std::string_view method;
  std::string_view path;
  int status = 0;
  std::optional<std::uint64_t> bytes;  // response body bytes sent
  std::uint64_t bytes_in = 0;          // request body bytes read (POST /sink); 0: left out
  std::optional<std::int64_t> duration_us;
  std::string_view error;
  std::string_view run, seq, path_label;  // the runner's X-Vlessbench-Run / -Seq / -Path
  std::string_view ja4;                   // HTTPS target: the fingerprint of the TLS client that reached the target
};
std::string format_event(const http_request_event& e);

// A target connection refused before it served anything: TLS garbage or a handshake that did not
// finish in time on a `tls = true` target (docs/targets.md).
struct target_reject_event {
  std::string_view listener;
  std::string_view peer;
  std::string_view reason;       // "tls_handshake_failed", "handshake_timeout"
  std::uint64_t bytes_seen = 0;  // bytes the peer sent before the refusal
  std::string_view detail;       // the TLS library's error, when it named one
  std::optional<std::int64_t> duration_us;
  std::string_view ja4;  // the client's TLS fingerprint, when its ClientHello arrived
};
std::string format_event(const target_reject_event& e);

// A [[banner]] connection at its close: the banner it was sent, what it echoed, why it ended.
struct banner_connection_event {
  std::string_view listener;
  std::string_view peer;
  const route_info* route = nullptr;      // the relaying session; nullptr: direct
  std::uint64_t bytes_in = 0;             // bytes the peer sent (all echoed unless cut short)
  std::uint64_t bytes_out = 0;            // banner + echo bytes written
  std::optional<std::int64_t> banner_us;  // accept -> banner written; absent when it never was
  std::int64_t duration_us = 0;
  std::string_view close_reason;  // "peer_eof", "slow_transfer", "idle_timeout", "pending_timeout", ...
};
std::string format_event(const banner_connection_event& e);
// One [[udp_target]] flow (datagrams from one peer address), aggregated: written once, when the
// flow has been idle for [limits] udp_idle_timeout_ms, when the flow table is full (the longest
// idle flow goes), or at the daemon's stop. Event name "udp.packet".
struct udp_packet_event {
  std::string_view listener;
  std::string_view peer;
  const route_info* route = nullptr;             // the relaying session at the flow's first datagram; nullptr: direct
  std::uint64_t packets_in = 0, bytes_in = 0;    // datagrams received from the peer
  std::uint64_t packets_out = 0, bytes_out = 0;  // echoes sent (with their trailers): bytes_out <= bytes_in
  // Datagrams too short for the route trailer (route_header.hpp format_udp_echo): answered in the
  // short form (counted in packets_out too), or not answered at all. Written when not 0.
  std::uint64_t short_answers = 0, unanswered = 0;
  std::int64_t duration_us = 0;   // first datagram -> last one
  std::string_view close_reason;  // "idle", "evicted", "stop", "route_changed"
};
std::string format_event(const udp_packet_event& e);

// Datagrams a [[udp_target]] or [[dns]] listener did not answer (core/runtime/udp_guard.hpp), for
// one reason: at most one line per listener and reason a second (target/udp_refusals.hpp).
struct udp_refused_event {
  std::string_view listener;
  std::string_view reason;      // "reflector_port", "own_listener", "echo_answer", "dns_response", ...
  std::uint64_t datagrams = 0;  // since the previous line for this listener and reason
  std::string_view last_peer;   // the source of the last one
};
std::string format_event(const udp_refused_event& e);

// One query the [[dns]] responder answered (or refused as malformed: rcode FORMERR and error).
struct dns_query_event {
  std::string_view listener;
  std::string_view peer;
  std::string_view transport;         // "udp" or "tcp"
  const route_info* route = nullptr;  // the relaying session; nullptr: direct
  std::string_view name;              // the question's name, lower case; empty when malformed
  std::uint16_t qtype = 0;
  std::string_view rcode;      // "NOERROR", "REFUSED", "FORMERR", "SERVFAIL"
  std::uint32_t delay_ms = 0;  // the answer waited this long (NAME.delay-MS.zone)
  std::string_view error;      // why FORMERR / SERVFAIL
};
std::string format_event(const dns_query_event& e);

// The [[dns]] responder's response rate limiting over one period (target/dns_rrl.hpp): written at
// most once a second, and only for a period in which answers were limited, so a flood is one line a
// second, not one per datagram. Event name "dns.rrl".
struct dns_rrl_event {
  std::string_view listener;
  std::int64_t period_ms = 0;    // the time these counts cover
  std::uint64_t answered = 0;    // judged and answered in full (within the budget)
  std::uint64_t slipped = 0;     // answered truncated (TC=1, no records)
  std::uint64_t dropped = 0;     // not answered
  std::uint64_t prefixes = 0;    // source prefixes limited in the period
  std::string_view last_prefix;  // the last one limited, e.g. "192.0.2.0/24"
};
std::string format_event(const dns_rrl_event& e);

// A browser probe's results as the page posted them (POST /probe/result, docs/probe.md), with the
// daemon's own summary of them; `route` is the route of the post itself.
struct probe_run_event {
  std::string_view listener;
  std::string_view peer;
  const route_info* route = nullptr;
  std::string_view user_agent;
  const probe_result* result = nullptr;    // required
  const probe_summary* summary = nullptr;  // required: summarize_probe(*result)
};
std::string format_event(const probe_run_event& e);

}  // namespace vlessbench
