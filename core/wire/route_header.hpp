#pragma once
// The route proof's response headers as format + parse pairs (DESIGN.md §3): the daemon's target
// writes them, the runner reads them, and both use this one definition.
//   X-Vlessbench-Route: direct | vless session=ID [sub=N] user=NAME [transport=ws|httpupgrade]
//   (sub=N: a Mux.Cool sub-connection of the session, route_info::sub)
//   Server-Timing: tls;dur=1.234, [upgrade;dur=0.2,] vless;dur=0.050, resolve;dur=..., upstream;dur=0.100   (ms)
//                  [, ack;desc=on] [, ja4;desc="t13d1516h2_8daaf6152771_e5627efa2ab1"] [, gen;desc=2]
//                  [, xget;dur=0.010, xpost;dur=0.020, xgaps;desc=2, xgap;dur=30.1, xgapmax;dur=30.5, xreuse;desc=0]
//                  (an XHTTP session's request arrivals: server_phases_ms below)
// Raw TLS sessions (the transport before there were others) keep the lines they always had.
// And the one stall threshold: a TLS-done -> VLESS-header gap at least this long is a suspected
// Nagle/delayed-ACK stall, in the daemon's log and in the runner's verdict alike.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/parse_result.hpp"
#include "core/wire/session_info.hpp"

namespace vlessbench {

// Linux's delayed-ACK timer is 40 ms; anything near it between two local hosts is no accident.
inline constexpr std::int64_t stall_threshold_us = 30'000;
inline constexpr double stall_threshold_ms = static_cast<double>(stall_threshold_us) / 1000.0;

// XHTTP packet-up: the client spaces its uplink POSTs (Xray's scMinPostsIntervalMs, 30 ms), so a
// VLESS header that did not fit the first POST waits for the next one. A header wait is that
// spacing, not Nagle meeting a delayed ACK, when the session had a POST gap of at least the
// threshold and the wait went on at least that long after its first POST arrived. All in ms on
// the session's clock: the wait began at wait_from and lasted wait; first_post and gap_max as
// Server-Timing's xpost and xgapmax (absent: not packet-up, or one POST).
bool wait_is_post_spacing(double wait_from, double wait, std::optional<double> first_post,
                          std::optional<double> gap_max);

enum class route_kind { unknown, direct, vless };
std::string_view to_string(route_kind r);  // "unknown", "direct", "vless"

struct route_label {
  route_kind kind = route_kind::unknown;
  std::optional<std::uint64_t> session;
  std::optional<std::uint32_t> sub;  // a Mux.Cool sub-connection; absent: the session's own upstream
  std::string user;
  std::string transport = "tls";  // absent from the header: raw TLS
};

// session: the relaying session, or nullptr for a direct request.
std::string format_route_header(const route_info* session);
// `direct` or `vless session=ID [sub=N] user=NAME [transport=T]` (further key=value items ignored); anything else, or
// an absent header, is unknown.
route_label parse_route_header(std::string_view value);

// A VLESS session's phases in ms, as Server-Timing carries them; absent when not reached.
struct server_phases_ms {
  std::optional<double> tls;       // accept -> TLS handshake done
  std::optional<double> upgrade;   // TLS done (accept over plain TCP) -> 101 sent (ws, httpupgrade)
  std::optional<double> vless;     // TLS done (or upgrade done) -> VLESS header complete (the stall shows here)
  std::optional<double> resolve;   // domain destinations only
  std::optional<double> upstream;  // header complete (or resolved) -> upstream connected
  // The VLESS listener's ACK policy (`ack;desc=on`): a stall on a listener that re-arms
  // QUICKACK cannot be the server's delayed ACK, so something in between terminates TCP.
  std::optional<std::string> ack;
  // The VLESS client's JA4 TLS fingerprint (`ja4;desc="t13d..."`, core/wire/ja4.hpp).
  std::optional<std::string> ja4;
  // The config generation the session was accepted under (`gen;desc=2`): which reload a run met.
  std::optional<std::uint64_t> generation;
  // XHTTP (session_phases::xhttp), on the session's clock, which starts at its first request:
  std::optional<double> xget;          // `xget;dur=`: the downlink GET arrived (absent: stream-one)
  std::optional<double> xpost;         // `xpost;dur=`: the first uplink POST arrived
  std::optional<std::uint64_t> xgaps;  // `xgaps;desc=N`: packet-up POST gaps so far
  std::optional<double> xgap;          // `xgap;dur=`: their median
  std::optional<double> xgapmax;       // `xgapmax;dur=`: the longest
  std::optional<bool> xreuse;          // `xreuse;desc=1`: over HTTP/2, the connection carried earlier sessions
};

// The phases, `ack;desc=POLICY` when quickack is not empty, `ja4;desc="FINGERPRINT"` when ja4 is
// not empty, `gen;desc=N` when generation is not 0.
std::string format_server_timing(const session_phases& p, std::string_view quickack = {}, std::string_view ja4 = {},
                                 std::uint64_t generation = 0);
// W3C Server-Timing: `name;dur=1.234, name2;desc="x";dur=2`. Unknown metrics are ignored.
server_phases_ms parse_server_timing(std::string_view value);

// The [[banner]] target's first line, its route proof (docs/targets.md):
//   VLESSBENCH-BANNER <listener> <route header value>\r\n
// e.g. "VLESSBENCH-BANNER banner vless session=7 user=default\r\n". At most max_banner_line bytes.
inline constexpr std::size_t max_banner_line = 256;
struct banner_line {
  std::string listener;
  route_label route;
};
std::string format_banner_line(std::string_view listener, const route_info* session);
// Pure: complete (consumed = through the LF), need_more (no LF yet, under the cap) or invalid
// (another prefix, no listener, over the cap, a control byte in the line).
parse_result<banner_line> parse_banner_line(std::string_view bytes);

// The [[udp_target]]'s echo (docs/target.md): each datagram comes back with a trailer naming its
// listener and route, so a client tells per datagram whether it went through VLESS. The echo is
// never longer than the datagram that asked (an echo that answers on 0.0.0.0 must be no amplifier):
// the trailer takes the place of the datagram's last bytes, so a client leaves room for it (pads
// its datagram with udp_echo_room bytes; the runner does):
//   <datagram minus its last T bytes> "\nVLESSBENCH-UDP " <listener> " " <route header value>
// e.g. "ping" + 200 bytes of padding -> "ping" + 200 - T bytes of it + "\nVLESSBENCH-UDP udp vless
// session=7 user=alice". A datagram too short for its trailer gets the short form instead, the same
// length as the datagram, which says how long it would have had to be:
//   <datagram minus its last S bytes> "\nVLESSBENCH-UDP-SHORT need=" <T>
// and one too short even for that (under about 30 bytes) gets no answer at all.
// Those size rules hold for direct sources only. A datagram relayed by one of the daemon's own VLESS
// sessions (session given: the route registry knew its source) cannot be a spoofed reflection, as its
// answer goes back into the authenticated session; one too short for its trailer (a 3-byte `nc -u`
// from an app behind a client's TUN) gets the trailer appended instead:
//   <datagram> "\nVLESSBENCH-UDP " <listener> " " <route header value>
inline constexpr std::size_t max_udp_echo = 65'507;
// Padding that leaves room for the trailer of listener and user names up to about 80 bytes
// together (a session id of 20 digits, a sub, transport=httpupgrade).
inline constexpr std::size_t udp_echo_room = 256;
enum class udp_echo_form { full, short_form, none };
struct udp_echo_answer {
  udp_echo_form form = udp_echo_form::none;
  std::string bytes;  // empty when form is none: nothing is sent
};
udp_echo_answer format_udp_echo(std::string_view datagram, std::string_view listener, const route_info* session);
// The datagram size a full answer needs for this trailer.
std::size_t udp_echo_trailer_size(std::string_view listener, const route_info* session);
struct udp_echo {
  std::string_view
      payload;  // the datagram as echoed, without the bytes the trailer took (a view into the parsed bytes)
  std::string listener;
  route_label route;
  std::size_t needed = 0;  // a short answer: the datagram size a full one needs
};
// complete (consumed = all of it); invalid when there is no trailer, its route is unknown, or it is the
// short form (reason says so, value.needed the size wanted).
parse_result<udp_echo> parse_udp_echo(std::string_view echo);

}  // namespace vlessbench
