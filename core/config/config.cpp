// The configuration schema: which tables and keys exist, their types, ranges and defaults, and
// the rules across them (unique listener names and endpoints, users required off loopback).
// Reading TOML and phrasing errors is core/config/toml_reader; addresses and networks are
// core/wire/net_address; the listener tables are core/config/config_listeners.cpp.
#include "core/config/config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config/config_schema.hpp"
#include "core/config/toml_reader.hpp"
#include "core/wire/vless_codec.hpp"

namespace vlessbench {

namespace {

using toml_reader::error_list;
using toml_reader::quote;
using toml_reader::table_reader;
using toml_reader::type_name;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += '\n';
    out += l;
  }
  return out;
}

user_config random_user(std::string name) {
  user_config u;
  u.name = std::move(name);
  u.uuid = vless::random_uuid();
  u.uuid_text = vless::format_uuid(u.uuid);
  return u;
}

void read_log(const table_reader& root, log_config& out) {
  if (!root.find("log")) return;
  const auto r = root.table("log");
  if (!r) return;
  r->reject_unknown({"level", "access", "queue_bytes", "max_lines_per_second", "max_session_lines_per_second"});
  if (auto level = r->string("level")) {
    static constexpr std::string_view levels[] = {"trace", "debug", "info", "warn", "error"};
    if (std::find(std::begin(levels), std::end(levels), *level) == std::end(levels))
      r->error("level", quote(*level) + ": expected one of trace, debug, info, warn, error");
    else
      out.level = *level;
  }
  if (auto access = r->string("access")) {
    if (access->empty())
      r->error("access", "must not be empty (\"stdout\" or a file path)");
    else
      out.access = *access;
  }
  if (auto bytes = r->integer("queue_bytes")) {
    if (*bytes < static_cast<std::int64_t>(log_config::min_queue_bytes) ||
        *bytes > static_cast<std::int64_t>(log_config::max_queue_bytes))
      r->error("queue_bytes", std::to_string(*bytes) + ": must be between " +
                                  std::to_string(log_config::min_queue_bytes) + " and " +
                                  std::to_string(log_config::max_queue_bytes));
    else
      out.queue_bytes = static_cast<std::size_t>(*bytes);
  }
  if (auto lines = r->integer("max_lines_per_second")) {
    if (*lines < 0 || *lines > static_cast<std::int64_t>(log_config::max_max_lines_per_second))
      r->error("max_lines_per_second", std::to_string(*lines) + ": must be between 0 (no bound) and " +
                                           std::to_string(log_config::max_max_lines_per_second));
    else
      out.max_lines_per_second = static_cast<std::uint64_t>(*lines);
  }
  if (auto lines = r->integer("max_session_lines_per_second")) {
    if (*lines < 0 || *lines > static_cast<std::int64_t>(log_config::max_max_lines_per_second))
      r->error("max_session_lines_per_second", std::to_string(*lines) + ": must be between 0 (no bound) and " +
                                                   std::to_string(log_config::max_max_lines_per_second));
    else
      out.max_session_lines_per_second = static_cast<std::uint64_t>(*lines);
  }
}

void read_tls(const table_reader& root, tls_config& out) {
  if (!root.find("tls")) return;
  const auto r = root.table("tls");
  if (!r) return;
  r->reject_unknown({"cert", "key", "generate", "names", "session_tickets", "min_version"});
  auto cert = r->string("cert");
  auto key = r->string("key");
  if (cert) out.cert = *cert;
  if (key) out.key = *key;
  // Only judge the pair when both keys that are present have the right type.
  bool cert_ok = cert || !r->find("cert");
  bool key_ok = key || !r->find("key");
  if (cert_ok && key_ok) {
    if (!out.cert.empty() && out.key.empty())
      r->error("cert", "set without tls.key (set both, or neither for an in-memory certificate)");
    else if (out.cert.empty() && !out.key.empty())
      r->error("key", "set without tls.cert (set both, or neither for an in-memory certificate)");
  }
  if (auto b = r->boolean("generate")) out.generate = *b;
  if (out.generate && out.cert.empty() && cert_ok && key_ok)
    r->error("generate", "needs tls.cert and tls.key: the paths the generated certificate is kept at");
  if (auto names = r->strings("names")) {
    for (const auto& n : *names) {
      const bool ok = !n.empty() && n.size() <= 253 && std::all_of(n.begin(), n.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '.' || c == '*';
      });
      if (!ok) r->error("names", quote(n) + ": not a DNS name");
    }
    out.names = *names;
  }
  if (auto b = r->boolean("session_tickets")) out.session_tickets = *b;
  if (auto v = r->string("min_version")) {
    if (*v == "1.2" || *v == "1.3")
      out.min_version = *v;
    else
      r->error("min_version", quote(*v) + ": expected \"1.2\" or \"1.3\"");
  }
}

void read_limits(const table_reader& root, limits_config& out) {
  if (!root.find("limits")) return;
  const auto r = root.table("limits");
  if (!r) return;
  r->reject_unknown({"handshake_timeout_ms",
                     "header_timeout_ms",
                     "connect_timeout_ms",
                     "idle_timeout_ms",
                     "drain_timeout_ms",
                     "max_sessions",
                     "threads",
                     "max_pending",
                     "pending_timeout_ms",
                     "min_rate_bytes",
                     "min_rate_window_ms",
                     "probe_results_per_minute",
                     "udp_idle_timeout_ms",
                     "max_mux_subs",
                     "max_sessions_per_client",
                     "max_upstreams_per_connection",
                     "max_upstreams_per_client",
                     "max_buffered_per_client",
                     "close_linger_ms",
                     "dns_rrl_responses_per_second",
                     "dns_rrl_slip",
                     "dns_rrl_window_ms"});
  auto bounded = [&](std::string_view key, std::int64_t max, std::int64_t min = 1) -> std::optional<std::int64_t> {
    auto v = r->integer(key);
    if (!v) return std::nullopt;
    if (*v < min || *v > max) {
      r->error(key, std::to_string(*v) + ": must be between " + std::to_string(min) + " and " + std::to_string(max));
      return std::nullopt;
    }
    return v;
  };
  constexpr std::int64_t max_ms = 3'600'000;
  auto ms = [&](std::string_view key, std::chrono::milliseconds& field) {
    if (auto v = bounded(key, max_ms)) field = std::chrono::milliseconds(*v);
  };
  ms("handshake_timeout_ms", out.handshake_timeout);
  ms("header_timeout_ms", out.header_timeout);
  ms("connect_timeout_ms", out.connect_timeout);
  ms("idle_timeout_ms", out.idle_timeout);
  ms("udp_idle_timeout_ms", out.udp_idle_timeout);
  ms("drain_timeout_ms", out.drain_timeout);
  if (auto v = bounded("close_linger_ms", 60'000, 0)) out.close_linger = std::chrono::milliseconds(*v);
  if (auto v = bounded("max_sessions", 1'000'000)) out.max_sessions = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("threads", limits_config::max_threads)) out.threads = static_cast<unsigned>(*v);
  if (auto v = bounded("max_pending", 1'000'000)) out.max_pending = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("max_mux_subs", 4'096)) out.max_mux_subs = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("max_sessions_per_client", 1'000'000))
    out.max_sessions_per_client = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("max_upstreams_per_connection", 1'000'000))
    out.max_upstreams_per_connection = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("max_upstreams_per_client", 1'000'000))
    out.max_upstreams_per_client = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("max_buffered_per_client", std::int64_t{1} << 34, 64 << 10))
    out.max_buffered_per_client = static_cast<std::uint64_t>(*v);
  ms("pending_timeout_ms", out.pending_timeout);
  if (auto v = bounded("min_rate_bytes", 1 << 30, 0)) out.min_rate_bytes = static_cast<std::uint32_t>(*v);
  ms("min_rate_window_ms", out.min_rate_window);
  if (auto v = bounded("probe_results_per_minute", 1'000'000, 0))
    out.probe_results_per_minute = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("dns_rrl_responses_per_second", 1'000'000, 0))
    out.dns_rrl_responses_per_second = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("dns_rrl_slip", 10, 0)) out.dns_rrl_slip = static_cast<std::uint32_t>(*v);
  ms("dns_rrl_window_ms", out.dns_rrl_window);
}

void read_destinations(const table_reader& root, destinations_config& out) {
  if (!root.find("destinations")) return;
  const auto r = root.table("destinations");
  if (!r) return;
  r->reject_unknown({"allow"});
  if (!r->find("allow")) return;
  const toml::node* n = r->find("allow");
  if (!n->is_array()) {
    r->error("allow", std::string("expected an array of strings, got ") + std::string(type_name(n->type())));
    return;
  }
  const toml::array& arr = *n->as_array();
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& item = *arr.get(i);
    const std::string key = toml_reader::index_path(r->key_path("allow"), i);
    const auto line = toml_reader::line_of(item.source());
    if (!item.is_string()) {
      r->errors().add(line, key, std::string("expected a string, got ") + std::string(type_name(item.type())));
      continue;
    }
    const std::string& text = item.as_string()->get();
    ip_network net;
    std::string reason;
    if (parse_ip_network(text, net, reason))
      out.allow.push_back(net);
    else
      r->errors().add(line, key, quote(text) + ": " + reason);
  }
}

// [admin] hosts: the names a request's Host may carry besides the listener's address.
void read_admin_hosts(const table_reader& r, admin_config& out) {
  if (const toml::node* n = r.find("hosts")) {
    if (!n->is_array()) {
      r.error("hosts", std::string("expected an array of strings, got ") + std::string(type_name(n->type())));
    } else {
      const toml::array& arr = *n->as_array();
      if (arr.size() > admin_config::max_hosts)
        r.error("hosts", "at most " + std::to_string(admin_config::max_hosts) + " names");
      for (std::size_t i = 0; i < arr.size() && i < admin_config::max_hosts; ++i) {
        const toml::node& item = *arr.get(i);
        const std::string key = toml_reader::index_path(r.key_path("hosts"), i);
        const auto line = toml_reader::line_of(item.source());
        if (!item.is_string()) {
          r.errors().add(line, key, std::string("expected a string, got ") + std::string(type_name(item.type())));
          continue;
        }
        std::string reason;
        if (auto name = normalize_host_name(item.as_string()->get(), reason))
          out.hosts.push_back(*name);
        else
          r.errors().add(line, key, quote(item.as_string()->get()) + ": " + reason);
      }
    }
  }
}

// [admin]: enabled = false or listen = "" turn it off; off loopback a token is required.
void read_admin(const table_reader& root, admin_config& out) {
  if (!root.find("admin")) return;
  const auto r = root.table("admin");
  if (!r) return;
  r->reject_unknown({"enabled", "listen", "token", "hosts", "header_timeout_ms", "max_connections", "max_pending",
                     "max_connections_per_client"});
  bool enabled = true;
  if (auto b = r->boolean("enabled")) enabled = *b;
  if (auto text = r->string("listen")) {
    asio::ip::tcp::endpoint ep;
    std::string reason;
    if (text->empty())
      out.listen.reset();
    else if (parse_endpoint(*text, ep, reason, port_zero::allowed))
      out.listen = ep;
    else
      r->error("listen", quote(*text) + ": " + reason);
  }
  if (auto token = r->string("token")) {
    const bool printable =
        std::all_of(token->begin(), token->end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
    if (token->size() < admin_config::min_token || token->size() > admin_config::max_token)
      r->error("token", "must be " + std::to_string(admin_config::min_token) + " to " +
                            std::to_string(admin_config::max_token) + " characters long");
    else if (!printable)
      r->error("token", "must be printable ASCII without spaces (it travels in a URL and a header)");
    else
      out.token = *token;
  }
  read_admin_hosts(*r, out);
  auto bounded = [&](std::string_view key, std::int64_t min, std::int64_t max) -> std::optional<std::int64_t> {
    auto v = r->integer(key);
    if (!v) return std::nullopt;
    if (*v < min || *v > max) {
      r->error(key, std::to_string(*v) + ": must be between " + std::to_string(min) + " and " + std::to_string(max));
      return std::nullopt;
    }
    return v;
  };
  if (auto v = bounded("header_timeout_ms", 1, 3'600'000)) out.header_timeout = std::chrono::milliseconds(*v);
  if (auto v = bounded("max_connections", 1, admin_config::max_max_connections))
    out.max_connections = static_cast<std::uint32_t>(*v);
  // The two shares of max_connections: a larger one could never be reached.
  for (const auto& [key, field] : {std::pair<std::string_view, std::uint32_t*>{"max_pending", &out.max_pending},
                                   {"max_connections_per_client", &out.max_connections_per_client}}) {
    if (auto v = bounded(key, 1, admin_config::max_max_connections)) {
      if (*v > out.max_connections)
        r->error(key, std::to_string(*v) + ": must not exceed admin.max_connections (" +
                          std::to_string(out.max_connections) + ")");
      else
        *field = static_cast<std::uint32_t>(*v);
    }
  }
  // Defaults above a smaller max_connections follow it.
  out.max_pending = std::min(out.max_pending, out.max_connections);
  out.max_connections_per_client = std::min(out.max_connections_per_client, out.max_connections);
  if (!enabled) out.listen.reset();
  if (out.listen && out.token.empty() && !unmapped(out.listen->address()).is_loopback() && !r->find("token"))
    r->error("listen", quote(format_endpoint(*out.listen)) +
                           ": the admin listener off loopback requires admin.token (at least " +
                           std::to_string(admin_config::min_token) +
                           " characters; send it as \"Authorization: Bearer TOKEN\" or ?token=TOKEN)");
}

// Where a name or UUID was first seen, for duplicate messages that point back.
struct first_seen {
  std::string key;
  std::uint32_t line;
};

// UUIDs anyone can read in this repository: the placeholder config/vlessbenchd.toml ships (the
// installer replaces it) and the one config/vlessbenchd.example.toml shows. Whoever knows one can
// use a daemon that serves it, so they are refused on a VLESS listener reachable from off this
// machine (issue 30).
constexpr std::array<std::string_view, 2> published_uuids = {"00000000-0000-4000-8000-000000000000",
                                                             "0bc2f2bd-f35f-4c1e-8b9b-befe527996d0"};

// A [[users]] entry whose UUID is a published one, judged once the listeners are known.
struct published_user {
  std::string uuid_text;
  std::string key;
  std::uint32_t line;
};

// Returns how many [[users]] entries the file declares, valid or not: an entry with a typo must
// not make the daemon invent a random user or claim that no user was configured.
std::size_t read_users(const table_reader& root, std::vector<user_config>& out,
                       std::vector<published_user>& published) {
  std::vector<std::pair<std::string, first_seen>> names;
  std::vector<std::pair<uuid_bytes, first_seen>> uuids;
  return root.each_table("users", [&](const table_reader& r, std::size_t) {
    r.reject_unknown({"name", "uuid"});
    user_config u;
    bool ok = true;
    if (auto name = r.required_string("name")) {
      if (!config_schema::check_name(r, *name)) {
        ok = false;
      } else {
        auto dup = std::find_if(names.begin(), names.end(), [&](auto& p) { return p.first == *name; });
        if (dup != names.end()) {
          r.error("name", quote(*name) + ": duplicate user name (first used by " + dup->second.key + " on line " +
                              std::to_string(dup->second.line) + ")");
          ok = false;
        } else {
          names.emplace_back(*name, first_seen{r.key_path("name"), r.line("name")});
        }
        u.name = *name;
      }
    } else {
      ok = false;
    }
    if (auto text = r.required_string("uuid")) {
      if (auto bytes = vless::parse_uuid(*text)) {
        auto dup = std::find_if(uuids.begin(), uuids.end(), [&](auto& p) { return p.first == *bytes; });
        if (dup != uuids.end()) {
          r.error("uuid", quote(*text) + ": duplicate UUID (first used by " + dup->second.key + " on line " +
                              std::to_string(dup->second.line) + ")");
          ok = false;
        } else {
          uuids.emplace_back(*bytes, first_seen{r.key_path("uuid"), r.line("uuid")});
        }
        u.uuid = *bytes;
        u.uuid_text = vless::format_uuid(*bytes);
        if (std::find(published_uuids.begin(), published_uuids.end(), u.uuid_text) != published_uuids.end())
          published.push_back({u.uuid_text, r.key_path("uuid"), r.line("uuid")});
      } else {
        r.error("uuid", quote(*text) + ": not a UUID (expected 8-4-4-4-12 hex digits)");
        ok = false;
      }
    } else {
      ok = false;
    }
    if (ok) out.push_back(std::move(u));
  });
}

config validate(const toml::table& root_table, std::string_view source_name) {
  error_list errors(source_name);
  config cfg;
  cfg.source = std::string(source_name);
  const table_reader root(root_table, "", errors);
  root.reject_unknown(
      {"log", "tls", "users", "vless", "target", "banner", "udp_target", "dns", "limits", "destinations", "admin"});

  read_log(root, cfg.log);
  read_tls(root, cfg.tls);
  read_limits(root, cfg.limits);
  read_destinations(root, cfg.destinations);
  read_admin(root, cfg.admin);
  std::vector<published_user> published;
  const std::size_t declared_users = read_users(root, cfg.users, published);

  const auto listeners = config_schema::read_listeners(root, cfg);
  if (cfg.admin.listen) {
    std::vector<asio::ip::tcp::endpoint> endpoints;
    for (const auto& v : cfg.vless) endpoints.push_back(v.listen);
    for (const auto& t : cfg.target) endpoints.push_back(t.listen);
    for (const auto& d : cfg.dns) endpoints.push_back(d.listen);  // its TCP half
    for (const auto& ep : endpoints) {
      if (!config_schema::endpoints_clash(ep, *cfg.admin.listen)) continue;
      const toml::node* admin = root.find("admin");
      errors.add(admin ? toml_reader::line_of(admin->source()) : 1, "admin.listen",
                 quote(format_endpoint(*cfg.admin.listen)) + ": overlaps the listener on " +
                     quote(format_endpoint(ep)) + (admin ? "" : " (the admin listener's default: set [admin] listen)"));
      break;
    }
  }
  if (listeners.declared == 0) errors.add(1, "vless", "no listeners: add at least one [[vless]] or [[target]] entry");

  // DESIGN.md §3: a random UUID is only acceptable while nobody else can reach the daemon.
  if (declared_users == 0) {
    if (const auto& exposed = listeners.first_exposed) {
      errors.add(exposed->line, "users",
                 "listening on " + format_endpoint(exposed->listen) + " (listener " + exposed->name +
                     ") requires at least one [[users]] entry");
    } else {
      cfg.users.push_back(random_user("default"));
    }
  }

  // A published UUID is fine for the loopback quickstart, never for a listener the network reaches.
  const auto exposed_vless = std::find_if(cfg.vless.begin(), cfg.vless.end(),
                                          [](const auto& v) { return !unmapped(v.listen.address()).is_loopback(); });
  if (exposed_vless != cfg.vless.end()) {
    for (const auto& p : published)
      errors.add(p.line, p.key,
                 quote(p.uuid_text) +
                     ": a UUID published in vlessbench's example configs, refused while the VLESS "
                     "listener " +
                     exposed_vless->name + " listens on " + format_endpoint(exposed_vless->listen) +
                     " (off loopback): put a UUID of your own here (`vlessbenchd uuid` or `cat "
                     "/proc/sys/kernel/random/uuid` prints one; the Debian package and `cmake --install` write one "
                     "into /etc/vlessbench/vlessbenchd.toml when they install it)");
  }

  if (!errors.empty()) throw config_error(errors.sorted());
  return cfg;
}

}  // namespace

config_error::config_error(std::vector<std::string> errors)
    : std::runtime_error(join_lines(errors)), errors_(std::move(errors)) {}

config parse_config(std::string_view toml_text, std::string_view source_name) {
  error_list errors(source_name);
  auto root = toml_reader::parse(toml_text, source_name, errors);
  if (!root) throw config_error(errors.sorted());
  return validate(*root, source_name);
}

config load_config_file(const std::filesystem::path& file) {
  auto fail = [&](int err) { return config_error({file.string() + ": cannot read: " + std::strerror(err)}); };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (that would block a reload, --check
  // and the whole daemon); anything but a regular file is refused before it is read.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw fail(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw config_error({file.string() + ": cannot read: not a regular file"});
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(::fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    ::close(fd);
    throw fail(err);
  }
  std::string text;
  char buf[16384];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) throw fail(errno);
  return parse_config(text, file.string());
}

config default_config() {
  config cfg;
  const auto loopback = asio::ip::make_address_v4("127.0.0.1");
  const tcp_policy kernel{true, quickack_mode::kernel};
  const tcp_policy quick{true, quickack_mode::on};
  cfg.vless.push_back({"default-ack", {loopback, 8443}, kernel, kernel});
  cfg.vless.push_back({"quickack", {loopback, 8444}, quick, quick});
  // One listener per transport (issue 13), so one batch compares them.
  cfg.vless.push_back({"ws", {loopback, 8445}, kernel, kernel, {transport_kind::ws, true, "/ws", "", 2048, ""}});
  cfg.vless.push_back(
      {"httpupgrade", {loopback, 8446}, kernel, kernel, {transport_kind::httpupgrade, true, "/up", "", 0, ""}});
  cfg.vless.push_back(
      {"grpc", {loopback, 8447}, kernel, kernel, {transport_kind::grpc, true, "/", "", 0, "", "vlessbench"}});
  // REALITY + Vision on raw TCP: the key made at start, refused ClientHellos relayed to the HTTPS
  // target below (a prober sees a real TLS site, and nothing leaves the host).
  vless_listener_config with_reality{"reality", {loopback, 8448}, kernel, kernel};
  with_reality.reality = reality::default_settings();
  cfg.vless.push_back(std::move(with_reality));
  // XHTTP over TLS (ALPN: what the transport serves) and over plain TCP (HTTP/1.1 and h2c).
  cfg.vless.push_back(
      {"xhttp", {loopback, 8449}, kernel, kernel, {.kind = transport_kind::xhttp, .tls = true, .path = "/xhttp"}});
  cfg.vless.push_back({"xhttp-plain",
                       {loopback, 8450},
                       kernel,
                       kernel,
                       {.kind = transport_kind::xhttp, .tls = false, .path = "/xhttp"}});
  cfg.target.push_back({"http", {loopback, 8080}, kernel});
  cfg.target.push_back({"https", {loopback, 8081}, kernel, true});
  cfg.target.push_back({"banner", {loopback, 8082}, kernel, false, true});
  cfg.udp_target.push_back({"udp", {loopback, 8083}});
  cfg.udp_target.push_back({"ntp", {loopback, 8123}, udp_mode::ntp});
  cfg.udp_target.push_back({"stun", {loopback, 8478}, udp_mode::stun});
  cfg.dns.push_back({"dns", {loopback, 8053}});
  cfg.users.push_back(random_user("default"));
  cfg.source = "<embedded default>";
  return cfg;
}

std::string_view to_string(udp_mode m) {
  switch (m) {
    case udp_mode::ntp: return "ntp";
    case udp_mode::stun: return "stun";
    case udp_mode::echo: break;
  }
  return "echo";
}

}  // namespace vlessbench
