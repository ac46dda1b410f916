// Listeners: [[vless]], [[target]], [[banner]], [[udp_target]] and [[dns]] (docs/configuration.md),
// one schema struct per kind. Split out of core/config/config.cpp, which reads the global tables and
// checks the rules across them.
#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config_schema.hpp"
#include "core/wire/net_address.hpp"

namespace vlessbench::config_schema {

using toml_reader::quote;
using toml_reader::table_reader;

bool endpoints_clash(const asio::ip::tcp::endpoint& a, const asio::ip::tcp::endpoint& b) {
  // Port 0 is whichever port the kernel gives at bind: never one another listener holds.
  if (a.port() != b.port() || a.port() == 0) return false;
  if (a.address() == b.address()) return true;
  if (a.address().is_v4() != b.address().is_v4()) return false;
  return a.address().is_unspecified() || b.address().is_unspecified();
}

bool check_name(const table_reader& r, const std::string& name) {
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    r.error("name", quote(name) + ": must not contain spaces or control characters");
    return false;
  }
  if (name.size() > 64) {
    r.error("name", quote(name) + ": longer than 64 bytes");
    return false;
  }
  return true;
}

namespace {

// Absent: the default policy; present and wrong: nullopt (the errors are added).
std::optional<tcp_policy> read_tcp_policy(const table_reader& parent, std::string_view key) {
  tcp_policy policy;
  if (!parent.find(key)) return policy;
  const auto r = parent.table(key);
  if (!r) return std::nullopt;
  r->reject_unknown({"nodelay", "quickack"});
  bool ok = true;
  if (r->find("nodelay")) {
    if (auto b = r->boolean("nodelay"))
      policy.nodelay = *b;
    else
      ok = false;
  }
  if (r->find("quickack")) {
    auto s = r->string("quickack");
    if (!s)
      ok = false;
    else if (*s == "kernel")
      policy.quickack = quickack_mode::kernel;
    else if (*s == "on")
      policy.quickack = quickack_mode::on;
    else if (*s == "off")
      policy.quickack = quickack_mode::off;
    else {
      r->error("quickack", quote(*s) + ": expected \"kernel\", \"on\" or \"off\"");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return policy;
}

// `emulate = { delay_ms, jitter_ms, loss_pct }`: absent, no emulation; present and wrong: nullopt
// (the errors are added).
std::optional<path_emulation> read_emulation(const table_reader& parent) {
  path_emulation e;
  if (!parent.find("emulate")) return e;
  const auto r = parent.table("emulate");
  if (!r) return std::nullopt;
  r->reject_unknown({"delay_ms", "jitter_ms", "loss_pct"});
  bool ok = true;
  const auto read_ms = [&](std::string_view key, std::uint32_t& out) {
    const auto v = r->integer(key);
    if (!v) {
      ok = ok && !r->find(key);
      return;
    }
    if (*v < 0 || *v > max_emulated_delay_ms) {
      r->error(key, std::to_string(*v) + ": expected 0 to " + std::to_string(max_emulated_delay_ms) + " ms");
      ok = false;
      return;
    }
    out = static_cast<std::uint32_t>(*v);
  };
  read_ms("delay_ms", e.delay_ms);
  read_ms("jitter_ms", e.jitter_ms);
  if (const auto* node = r->find("loss_pct")) {
    const auto v = node->value<double>();  // an integer reads as its value too
    if (!v || !node->is_number()) {
      r->error("loss_pct", "expected a number (percent, 0 to 100)");
      ok = false;
    } else if (!(*v >= 0 && *v <= 100)) {
      r->error("loss_pct", std::to_string(*v) + ": expected 0 to 100 (percent)");
      ok = false;
    } else {
      e.loss_pct = *v;
    }
  }
  if (ok && e.jitter_ms > e.delay_ms) {
    r->error("jitter_ms", std::to_string(e.jitter_ms) + ": more than delay_ms (" + std::to_string(e.delay_ms) +
                              "): netem would reorder the listener's packets");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return e;
}

// --- Listeners -----------------------------------------------------------------------------------
// A [[vless]] or [[target]] entry is name and listen (read_listener_common, the same for both)
// plus the keys of its kind, one schema struct each. Adding a key to a kind: its name in keys,
// its field in the config struct (config.hpp), one read line in read().

// The keys every listener has, already checked (nullopt: missing or invalid, error added).
struct listener_fields {
  std::optional<std::string> name;
  std::optional<asio::ip::tcp::endpoint> listen;
};

// security = "reality" and its keys (docs/configuration.md "REALITY"); nullopt for TLS. ok is
// cleared when a key is wrong (the errors are added).
std::optional<reality::settings> read_reality(const table_reader& r, const transport_spec& transport, bool& ok) {
  const auto security = r.string("security").value_or("tls");
  static constexpr std::array<std::string_view, 6> reality_keys{"private_key", "server_names",  "short_ids",
                                                                "target",      "max_time_diff", "require_mlkem_share"};
  if (security == "tls") {
    for (const auto key : reality_keys)
      if (r.find(key)) {
        r.error(key, "only with security = \"reality\"");
        ok = false;
      }
    return std::nullopt;
  }
  if (security != "reality") {
    r.error("security", quote(security) + ": expected \"tls\" or \"reality\"");
    ok = false;
    return std::nullopt;
  }
  if (transport.kind != transport_kind::tls && transport.kind != transport_kind::grpc &&
      transport.kind != transport_kind::xhttp) {
    r.error("security", "\"reality\" carries transport = \"tls\" (raw TCP), \"grpc\" or \"xhttp\"");
    ok = false;
  }
  if (!transport.tls) {
    r.error("security", "\"reality\" is the security layer: tls = false contradicts it");
    ok = false;
  }
  reality::settings s = reality::default_settings();
  if (auto key = r.string("private_key")) {
    s.key_generated = false;
    if (auto k = reality::decode_key(*key)) {
      s.private_key = *k;
    } else {
      r.error("private_key", "expected an X25519 private key in base64url (43 characters, as `xray x25519` prints)");
      ok = false;
    }
  }
  s.server_names = r.strings("server_names").value_or(s.server_names);
  if (s.server_names.empty()) {
    r.error("server_names", "at least one name: a client's SNI must be one of them");
    ok = false;
  }
  s.short_ids_text = r.strings("short_ids").value_or(s.short_ids_text);
  s.short_ids.clear();
  for (const auto& text : s.short_ids_text) {
    if (auto id = reality::parse_short_id(text)) {
      s.short_ids.push_back(*id);
    } else {
      r.error("short_ids", quote(text) + ": expected 0 to 16 hex digits, an even count");
      ok = false;
    }
  }
  if (s.short_ids_text.empty()) {
    r.error("short_ids", "at least one (\"\" is the empty short id)");
    ok = false;
  }
  s.target = r.string("target").value_or("");
  if (!s.target.empty() && (s.target.rfind(':') == std::string::npos || s.target.back() == ':')) {
    r.error("target", quote(s.target) + ": expected host:port");
    ok = false;
  }
  if (auto ms = r.integer("max_time_diff")) {
    if (*ms < 0 || *ms > 86'400'000) {
      r.error("max_time_diff", "milliseconds, 0 (any) to 86400000");
      ok = false;
    } else {
      s.max_time_diff_ms = static_cast<std::uint32_t>(*ms);
    }
  }
  s.require_mlkem_share = r.boolean("require_mlkem_share").value_or(false);
  return s;
}

struct vless_schema {
  static constexpr std::string_view table = "vless";
  static constexpr std::array<std::string_view, 24> keys{"name",
                                                         "listen",
                                                         "tcp",
                                                         "upstream_tcp",
                                                         "transport",
                                                         "tls",
                                                         "path",
                                                         "host",
                                                         "max_early_data",
                                                         "early_data_header",
                                                         "service_name",
                                                         "security",
                                                         "private_key",
                                                         "short_ids",
                                                         "server_names",
                                                         "target",
                                                         "max_time_diff",
                                                         "require_mlkem_share",
                                                         "emulate",
                                                         "mode",
                                                         "padding_bytes",
                                                         "max_post_bytes",
                                                         "max_buffered_posts",
                                                         "session_timeout_ms"};
  // Reads every key of the kind (so all its errors are reported), then builds the listener.
  static std::optional<vless_listener_config> read(const table_reader& r, const listener_fields& f) {
    auto tcp = read_tcp_policy(r, "tcp");
    auto upstream = read_tcp_policy(r, "upstream_tcp");
    // The transport's keys are checked in core/wire/transport_spec.cpp.
    transport_spec transport;
    const auto transport_errors = validate_transport(
        {r.string("transport"), r.boolean("tls"), r.string("path"), r.string("host"), r.integer("max_early_data"),
         r.string("early_data_header"), r.string("service_name"), r.string("mode"), r.string("padding_bytes"),
         r.integer("max_post_bytes"), r.integer("max_buffered_posts"), r.integer("session_timeout_ms")},
        transport);
    for (const auto& [key, message] : transport_errors) r.error(key, message);
    bool reality_ok = true;
    auto reality = read_reality(r, transport, reality_ok);
    auto emulate = read_emulation(r);
    if (!f.name || !f.listen || !tcp || !upstream || !transport_errors.empty() || !reality_ok || !emulate)
      return std::nullopt;
    return vless_listener_config{*f.name, *f.listen, *tcp, *upstream, std::move(transport), std::move(reality),
                                 *emulate};
  }
};

struct target_schema {
  static constexpr std::string_view table = "target";
  static constexpr std::array<std::string_view, 7> keys{"name",        "listen",     "tcp",    "tls",
                                                        "index_links", "index_host", "emulate"};
  static std::optional<target_listener_config> read(const table_reader& r, const listener_fields& f) {
    auto tcp = read_tcp_policy(r, "tcp");
    const bool tls = r.boolean("tls").value_or(false);
    const bool index_links = r.boolean("index_links").value_or(false);
    // A name or address literal the share links carry (normalize_host_name: no port, no markup).
    std::optional<std::string> index_host = std::string();
    if (auto h = r.string("index_host")) {
      std::string reason;
      index_host = normalize_host_name(*h, reason);
      if (!index_host) r.error("index_host", quote(*h) + ": " + reason);
    }
    auto emulate = read_emulation(r);
    if (!f.name || !f.listen || !tcp || !index_host || !emulate) return std::nullopt;
    return target_listener_config{*f.name, *f.listen, *tcp, tls, false, index_links, std::move(*index_host), *emulate};
  }
};

// [[banner]]: a server-first target (docs/target.md), one of the daemon's own targets.
struct banner_schema {
  static constexpr std::string_view table = "banner";
  static constexpr std::array<std::string_view, 4> keys{"name", "listen", "tcp", "emulate"};
  static std::optional<target_listener_config> read(const table_reader& r, const listener_fields& f) {
    auto tcp = read_tcp_policy(r, "tcp");
    auto emulate = read_emulation(r);
    if (!f.name || !f.listen || !tcp || !emulate) return std::nullopt;
    return target_listener_config{*f.name, *f.listen, *tcp, false, true, false, {}, *emulate};
  }
};

// [[udp_target]]: a UDP echo target (docs/target.md). Its endpoint clashes only with other UDP
// listeners: TCP and UDP ports are separate.
struct udp_target_schema {
  static constexpr std::string_view table = "udp_target";
  static constexpr bool udp = true;
  static constexpr std::array<std::string_view, 3> keys{"name", "listen", "mode"};
  static std::optional<udp_listener_config> read(const table_reader& r, const listener_fields& f) {
    udp_mode mode = udp_mode::echo;
    bool ok = true;
    if (auto m = r.string("mode")) {
      if (*m == "ntp") {
        mode = udp_mode::ntp;
      } else if (*m == "stun") {
        mode = udp_mode::stun;
      } else if (*m != "echo") {
        r.error("mode", quote(*m) + ": expected \"echo\", \"ntp\" or \"stun\"");
        ok = false;
      }
    } else if (r.find("mode")) {
      ok = false;
    }
    if (!f.name || !f.listen || !ok) return std::nullopt;
    return udp_listener_config{*f.name, {f.listen->address(), f.listen->port()}, mode};
  }
};

// [[dns]]: UDP and TCP on one port, so its endpoint clashes with TCP and UDP listeners alike.
struct dns_schema {
  static constexpr std::string_view table = "dns";
  static constexpr int protocols = 3;
  static constexpr std::array<std::string_view, 5> keys{"name", "listen", "zone", "a", "aaaa"};
  static std::optional<dns_listener_config> read(const table_reader& r, const listener_fields& f) {
    dns_listener_config c;
    bool ok = true;
    if (auto zone = r.string("zone")) {
      std::string z(*zone);
      std::transform(z.begin(), z.end(), z.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (!z.empty() && z.back() == '.') z.pop_back();
      if (!valid_zone(z)) {
        r.error("zone", quote(*zone) + ": not a DNS name (labels of 1..63 letters, digits, '-', at most 253 bytes)");
        ok = false;
      }
      c.zone = z;
    } else if (r.find("zone")) {
      ok = false;
    }
    auto address = [&](std::string_view key, bool v4) -> std::optional<asio::ip::address> {
      auto text = r.string(key);
      if (!text) return std::nullopt;
      std::error_code ec;
      const auto addr = asio::ip::make_address(*text, ec);
      if (ec || addr.is_v4() != v4) {
        r.error(key, quote(*text) + (v4 ? ": not an IPv4 address" : ": not an IPv6 address"));
        ok = false;
        return std::nullopt;
      }
      return addr;
    };
    if (auto a = address("a", true)) c.a = a->to_v4();
    if (auto a = address("aaaa", false)) c.aaaa = a->to_v6();
    if (!f.name || !f.listen || !ok) return std::nullopt;
    c.name = *f.name;
    c.listen = *f.listen;
    return c;
  }
  static bool valid_zone(std::string_view z) {
    if (z.empty() || z.size() > 253) return false;
    std::size_t label = 0;
    for (const char ch : z) {
      if (ch == '.') {
        if (label == 0) return false;
        label = 0;
      } else if ((std::isalnum(static_cast<unsigned char>(ch)) || ch == '-') && ++label <= 63) {
        continue;
      } else {
        return false;
      }
    }
    return label > 0;
  }
};

template <class Schema>
constexpr bool is_udp_schema = requires {
  Schema::udp;
};
// Which ports a listener takes: 1 TCP, 2 UDP, 3 both.
template <class Schema>
constexpr int protocols_of() {
  if constexpr (requires { Schema::protocols; })
    return Schema::protocols;
  else
    return is_udp_schema<Schema> ? 2 : 1;
}

listener_fields read_listener_common(const table_reader& r) {
  listener_fields f;
  f.name = r.required_string("name");
  if (f.name && !check_name(r, *f.name)) f.name.reset();
  if (auto text = r.required_string("listen")) {
    asio::ip::tcp::endpoint ep;
    std::string reason;
    if (parse_endpoint(*text, ep, reason, port_zero::allowed))
      f.listen = ep;
    else
      r.error("listen", quote(*text) + ": " + reason);
  }
  return f;
}

// Every listener of every kind read so far: names and endpoints are unique across kinds, and
// the first one reachable from off this machine decides whether a random user is acceptable.
class listener_registry {
 public:
  // Returns false when the name or endpoint clashes with an earlier listener.
  bool add(const table_reader& r, const listener_fields& f, int protocols) {
    bool ok = true;
    if (f.name) {
      auto dup = std::find_if(seen_.begin(), seen_.end(), [&](auto& s) { return s.name == *f.name; });
      if (dup != seen_.end()) {
        r.error("name", quote(*f.name) + ": duplicate listener name (first used by " + dup->name_key + " on line " +
                            std::to_string(dup->name_line) + ")");
        ok = false;
      }
    }
    if (f.listen) {
      auto dup = std::find_if(seen_.begin(), seen_.end(), [&](auto& s) {
        return (s.protocols & protocols) != 0 && s.listen && endpoints_clash(*s.listen, *f.listen);
      });
      if (dup != seen_.end()) {
        std::string what = *dup->listen == *f.listen ? "already used by " : "overlaps ";
        r.error("listen", quote(format_endpoint(*f.listen)) + ": " + what + dup->listen_key + " " +
                              quote(format_endpoint(*dup->listen)) + " on line " + std::to_string(dup->listen_line));
        ok = false;
      }
    }
    seen_.push_back(seen{f.name.value_or(""), r.key_path("name"), r.line("name"), f.listen, r.key_path("listen"),
                         r.line("listen"), protocols});
    if (f.listen && f.name && !unmapped(f.listen->address()).is_loopback() && !first_exposed_)
      first_exposed_ = exposed{*f.name, *f.listen, r.line("listen")};
    return ok;
  }

  using exposed = listeners_read::exposed;
  const std::optional<exposed>& first_exposed() const { return first_exposed_; }

 private:
  // Where each listener name and endpoint was first seen, for duplicate messages that point back.
  struct seen {
    std::string name;
    std::string name_key;
    std::uint32_t name_line;
    std::optional<asio::ip::tcp::endpoint> listen;
    std::string listen_key;
    std::uint32_t listen_line;
    int protocols;  // 1 TCP, 2 UDP, 3 both
  };
  std::vector<seen> seen_;
  std::optional<exposed> first_exposed_;
};

// Reads every [[Schema::table]] entry into out; returns how many entries the file declares.
template <class Schema, class Listener>
std::size_t read_table(const table_reader& root, listener_registry& registry, std::vector<Listener>& out) {
  return root.each_table(Schema::table, [&](const table_reader& r, std::size_t) {
    r.reject_unknown(Schema::keys);
    const listener_fields f = read_listener_common(r);
    auto listener = Schema::read(r, f);
    const bool unique = registry.add(r, f, protocols_of<Schema>());
    if (listener && unique) out.push_back(std::move(*listener));
  });
}

}  // namespace

listeners_read read_listeners(const table_reader& root, config& cfg) {
  listener_registry registry;
  listeners_read out;
  out.declared += read_table<vless_schema>(root, registry, cfg.vless);
  out.declared += read_table<target_schema>(root, registry, cfg.target);
  out.declared += read_table<banner_schema>(root, registry, cfg.target);
  out.declared += read_table<udp_target_schema>(root, registry, cfg.udp_target);
  out.declared += read_table<dns_schema>(root, registry, cfg.dns);
  out.first_exposed = registry.first_exposed();
  return out;
}

}  // namespace vlessbench::config_schema
