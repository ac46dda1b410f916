#pragma once
// What the user asks to measure, parsed from the command line without touching the network:
// the target URL and the `--path NAME=SPEC` arguments.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/share_link.hpp"

namespace vlessbench::runner {

// forward: a plain TCP port forward in front of the target (v2ray dokodemo-door, a Clash tunnel,
// socat): the runner connects there and speaks HTTP as if direct.
// tun: a plain socket the OS routes into a proxy client's TUN device (`tun` dials the target,
// `tun://H:P` another address of it that the client's rules send into the tunnel): dialled like
// direct, but expected to arrive through VLESS, so a "direct" route is its mismatch.
// tls: a bare TLS terminator in front of the target (HAProxy in TCP mode, stunnel): TCP connect,
// TLS handshake (no certificate check, SNI only for a name), then HTTP as if direct; the floor
// of what any TLS relay adds, dialled by the same TLS code as the vless paths.
enum class path_kind { direct, http_connect, socks5, vless, forward, tun, tls };
std::string_view to_string(path_kind k);

// How the built-in VLESS client writes: header and GET in one write (default), or the header as
// its own TLS record followed by the GET, the way Nagle-prone clients do.
enum class write_mode { one, split };
std::string_view to_string(write_mode w);

// What a new-connection sample is on a mux path: a new sub on the path's mux connection (made
// before the clock), or a fresh mux connection carrying its first sub (docs/methodology.md).
enum class mux_new_mode { sub, connection };
std::string_view to_string(mux_new_mode m);  // "sub", "connection"

struct vless_client_options {
  bool nodelay = true;
  write_mode writes = write_mode::one;
};

// A bulk run (`run --bulk SIZE`) measures each path twice per round, as two paths of its own:
// NAME/down (GET /bytes/SIZE) and NAME/up (POST /sink with SIZE bytes).
enum class bulk_direction { none, down, up };
std::string_view to_string(bulk_direction d);  // "", "down", "up"

struct path_spec {
  std::string name;
  bulk_direction bulk = bulk_direction::none;
  path_kind kind = path_kind::direct;
  std::string spec;  // as given, for the report
  std::string host;  // proxy, VLESS server or tun://H:P address; empty for direct and tun
  std::uint16_t port = 0;
  std::optional<share_link> link;  // vless only
  // Per-path overrides of --vless-nodelay / --vless-writes, given as extra query parameters of
  // the vless:// link (`nodelay=off`, `writes=split`) so one run can hold both client flavours.
  std::optional<bool> nodelay;
  std::optional<write_mode> writes;
  // vless only: `mux=on` (or 1/true/yes): every sample is a sub-connection (Mux.Cool, command 3)
  // of one mux connection per path (runner/mux_tunnel.hpp); `muxnew=connection`: a new-connection
  // sample opens a fresh mux connection for its one sub instead. `packetEncoding=xudp` (kept in
  // the link, as share links spell it): UDP goes as XUDP sub-connections; TCP is unaffected.
  bool mux = false;
  // type=xhttp links: `postinterval=MS`, the least time between two packet-up POSTs (default 30,
  // Xray's scMinPostsIntervalMs; 0: none).
  std::optional<std::uint32_t> xhttp_post_interval_ms;
  mux_new_mode mux_new = mux_new_mode::sub;
  bool xudp = false;

  vless_client_options client_options(const vless_client_options& defaults) const;
};

// What the target speaks (docs/runner.md "Target kinds"): plain HTTP, HTTP inside a TLS session
// the runner opens through the tunnel (its handshake is the inner_tls phase), or a server that
// speaks first (the daemon's [[banner]]: time to the first server byte, then an echo), or a UDP
// target: the daemon's [[udp_target]] echo (one datagram's round trip) or its [[dns]] responder
// (one A query's time), or a [[udp_target]] in mode "ntp" (one NTP v4 query) or "stun" (one STUN
// Binding request), all carried as datagrams (docs/runner.md "UDP and DNS targets").
enum class target_scheme { http, https, banner, udp, dns, ntp, stun };
std::string_view to_string(target_scheme s);  // "http", "https", "banner", "udp", "dns", "ntp", "stun"
bool is_datagram(target_scheme s);            // udp, dns, ntp, stun

struct target_url {
  target_scheme scheme = target_scheme::http;
  std::string host;  // without brackets
  std::uint16_t port = 80;
  std::string path = "/";
  std::string dns_name;           // dns:// only: the name queried (lower case, no final dot)
  std::string authority() const;  // for Host and CONNECT: "host:port", IPv6 in brackets
};

// `http://HOST[:PORT][/PATH]`, `https://HOST[:PORT][/PATH]` (port 443 by default),
// `banner://HOST:PORT`, `udp://HOST:PORT`, `ntp://HOST[:PORT]` (123 by default) or
// `stun://HOST[:PORT]` (3478 by default) (no path), or
// `dns://HOST[:PORT]/NAME` (port 53 by default; NAME a DNS name, queried for A).
std::optional<target_url> parse_target_url(std::string_view text, std::string& reason);

// UDP and DNS targets travel as datagrams: only direct, socks5:// (UDP ASSOCIATE) and vless://
// (command 2) paths carry them; any other kind is a usage error naming the path.
bool check_paths_for_target(const std::vector<path_spec>& paths, const target_url& target, std::string& reason);

// --bulk: every path becomes NAME/down and NAME/up (in that order, baseline's first).
std::vector<path_spec> bulk_paths(const std::vector<path_spec>& paths);

// `NAME=SPEC`; SPEC is `direct`, `http://H:P`, `socks5://H:P`, `tcp://H:P`, `tls://H:P`, `tun`,
// `tun://H:P` or a vless:// share link.
std::optional<path_spec> parse_path_arg(std::string_view arg, std::string& reason);

// Validates a whole list: unique names; puts a path named "direct" first when no direct path was
// given, because every paired difference is taken against it. Returns the baseline's index.
std::optional<std::size_t> finalize_paths(std::vector<path_spec>& paths, std::string& reason);

// --nagle-paths: the named vless paths get nodelay=off and writes=split; any other name is an error.
bool apply_nagle_paths(std::vector<path_spec>& paths, const std::vector<std::string>& names, std::string& reason);

bool parse_on_off(std::string_view text, bool& out);

}  // namespace vlessbench::runner
