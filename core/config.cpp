#include "core/config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <memory>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/vless_codec.hpp"
#include <toml++/toml.h>

namespace vlessbench {

std::string_view to_string(quickack_mode m) {
  switch (m) {
    case quickack_mode::kernel: return "kernel";
    case quickack_mode::on: return "on";
    case quickack_mode::off: return "off";
  }
  return "kernel";
}

namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += '\n';
    out += l;
  }
  return out;
}

// Values are echoed inside error messages; escaping keeps one error on one line, and the cap
// keeps a pasted certificate or a fuzzer's megabyte string from flooding the log.
std::string quote(std::string_view s) {
  constexpr std::size_t max_bytes = 120;
  std::string out = "\"";
  std::size_t n = 0;
  for (; n < s.size() && n < max_bytes; ++n) {
    auto c = static_cast<unsigned char>(s[n]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) {
    // Do not cut a UTF-8 sequence in half.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xc0) out.pop_back();
    out += "...";
  }
  out += '"';
  return out;
}

// toml++ may echo raw key text in its description; one error must stay one line.
std::string escape_controls(std::string_view s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

bool is_bare_key(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string child_path(std::string_view parent, std::string_view key) {
  std::string k = is_bare_key(key) ? std::string(key) : quote(key);
  if (parent.empty()) return k;
  return std::string(parent) + "." + k;
}

std::string index_path(std::string_view parent, std::size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

std::string_view type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::uint32_t line_of(const toml::source_region& r) { return r.begin.line == 0 ? 1 : r.begin.line; }

class error_list {
 public:
  explicit error_list(std::string_view file) : file_(file) {}

  void add(std::uint32_t line, std::string_view key, std::string_view message) {
    std::string e = file_ + ":" + std::to_string(line) + ": ";
    if (!key.empty()) {
      e += key;
      e += ": ";
    }
    e += message;
    items_.emplace_back(line, std::move(e));
  }

  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }

  // Reported top to bottom, as the reader scans the file; ties keep discovery order.
  std::vector<std::string> sorted() {
    std::stable_sort(items_.begin(), items_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (auto& [line, text] : items_) out.push_back(std::move(text));
    return out;
  }

 private:
  std::string file_;
  std::vector<std::pair<std::uint32_t, std::string>> items_;
};

// Typed access to one TOML table; every problem lands in the shared error_list under the key's
// full dotted path.
class table_reader {
 public:
  table_reader(const toml::table& table, std::string path, error_list& errors)
      : table_(table), path_(std::move(path)), errors_(errors) {}

  const std::string& path() const { return path_; }
  std::uint32_t line() const { return line_of(table_.source()); }
  std::string key_path(std::string_view key) const { return child_path(path_, key); }

  const toml::node* find(std::string_view key) const { return table_.get(key); }

  std::uint32_t line(std::string_view key) const {
    const toml::node* n = find(key);
    return n ? line_of(n->source()) : line();
  }

  void error(std::string_view key, std::string_view message) const {
    errors_.add(line(key), key_path(key), message);
  }

  void reject_unknown(std::initializer_list<std::string_view> known) const {
    for (auto&& [k, v] : table_) {
      if (std::find(known.begin(), known.end(), k.str()) == known.end())
        errors_.add(line_of(k.source()), key_path(k.str()), "unknown key");
    }
  }

  std::optional<std::string> string(std::string_view key) const {
    const toml::node* n = typed(key, toml::node_type::string);
    if (!n) return std::nullopt;
    return n->as_string()->get();
  }
  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* n = typed(key, toml::node_type::boolean);
    if (!n) return std::nullopt;
    return n->as_boolean()->get();
  }
  std::optional<std::int64_t> integer(std::string_view key) const {
    const toml::node* n = typed(key, toml::node_type::integer);
    if (!n) return std::nullopt;
    return n->as_integer()->get();
  }
  std::optional<std::vector<std::string>> strings(std::string_view key) const {
    const toml::node* n = typed(key, toml::node_type::array);
    if (!n) return std::nullopt;
    std::vector<std::string> out;
    for (const auto& item : *n->as_array()) {
      if (!item.is_string()) {
        error(key, std::string("expected an array of strings, found a ") + std::string(type_name(item.type())));
        return std::nullopt;
      }
      out.push_back(item.as_string()->get());
    }
    return out;
  }
  const toml::table* table(std::string_view key) const {
    const toml::node* n = typed(key, toml::node_type::table);
    return n ? n->as_table() : nullptr;
  }
  const toml::array* array_of_tables(std::string_view key) const {
    const toml::node* n = find(key);
    if (!n) return nullptr;
    if (!n->is_array()) {
      error(key, std::string("expected an array of tables, got ") + std::string(type_name(n->type())));
      return nullptr;
    }
    return n->as_array();
  }

  // A required string: absent, wrong type and empty are all errors.
  std::optional<std::string> required_string(std::string_view key) const {
    if (!find(key)) {
      error(key, "missing");
      return std::nullopt;
    }
    auto s = string(key);
    if (s && s->empty()) {
      error(key, "must not be empty");
      return std::nullopt;
    }
    return s;
  }

 private:
  const toml::node* typed(std::string_view key, toml::node_type want) const {
    const toml::node* n = find(key);
    if (!n) return nullptr;
    if (n->type() != want) {
      error(key, std::string("expected ") + std::string(type_name(want)) + ", got " +
                     std::string(type_name(n->type())));
      return nullptr;
    }
    return n;
  }

  const toml::table& table_;
  std::string path_;
  error_list& errors_;
};

user_config random_user(std::string name) {
  user_config u;
  u.name = std::move(name);
  u.uuid = vless::random_uuid();
  u.uuid_text = vless::format_uuid(u.uuid);
  return u;
}

bool is_loopback(const asio::ip::address& a) {
  if (a.is_v4()) return a.to_v4().is_loopback();
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).is_loopback();
  return v6.is_loopback();
}

// Linux refuses to bind a.b.c.d:P next to a listening 0.0.0.0:P (and [x]:P next to [::]:P) even
// with SO_REUSEADDR, so those pairs are as much a clash as two identical endpoints.
bool endpoints_clash(const asio::ip::tcp::endpoint& a, const asio::ip::tcp::endpoint& b) {
  if (a.port() != b.port()) return false;
  if (a.address() == b.address()) return true;
  if (a.address().is_v4() != b.address().is_v4()) return false;
  return a.address().is_unspecified() || b.address().is_unspecified();
}

std::optional<tcp_policy> read_tcp_policy(const table_reader& parent, std::string_view key,
                                          error_list& errors) {
  tcp_policy policy;
  if (!parent.find(key)) return policy;
  const toml::table* t = parent.table(key);
  if (!t) return std::nullopt;
  table_reader r(*t, parent.key_path(key), errors);
  r.reject_unknown({"nodelay", "quickack"});
  bool ok = true;
  if (r.find("nodelay")) {
    if (auto b = r.boolean("nodelay")) policy.nodelay = *b;
    else ok = false;
  }
  if (r.find("quickack")) {
    auto s = r.string("quickack");
    if (!s) ok = false;
    else if (*s == "kernel") policy.quickack = quickack_mode::kernel;
    else if (*s == "on") policy.quickack = quickack_mode::on;
    else if (*s == "off") policy.quickack = quickack_mode::off;
    else {
      r.error("quickack", quote(*s) + ": expected \"kernel\", \"on\" or \"off\"");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return policy;
}

// Where each listener name and endpoint was first seen, for duplicate messages that point back.
struct listener_seen {
  std::string name;
  std::string name_key;
  std::uint32_t name_line;
  std::optional<asio::ip::tcp::endpoint> listen;
  std::string listen_key;
  std::uint32_t listen_line;
};

struct listener_fields {
  std::optional<std::string> name;
  std::optional<asio::ip::tcp::endpoint> listen;
};

listener_fields read_listener_common(const table_reader& r) {
  listener_fields f;
  f.name = r.required_string("name");
  if (f.name) {
    // Names travel in the X-Vlessbench-Route header and space-separated log fields.
    if (std::any_of(f.name->begin(), f.name->end(),
                    [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
      r.error("name", quote(*f.name) + ": must not contain spaces or control characters");
      f.name.reset();
    } else if (f.name->size() > 64) {
      r.error("name", quote(*f.name) + ": longer than 64 bytes");
      f.name.reset();
    }
  }
  if (auto text = r.required_string("listen")) {
    asio::ip::tcp::endpoint ep;
    std::string reason;
    if (parse_endpoint(*text, ep, reason)) f.listen = ep;
    else r.error("listen", quote(*text) + ": " + reason);
  }
  return f;
}

void read_log(const table_reader& root, log_config& out, error_list& errors) {
  if (!root.find("log")) return;
  const toml::table* t = root.table("log");
  if (!t) return;
  table_reader r(*t, "log", errors);
  r.reject_unknown({"level", "access", "queue_bytes"});
  if (auto level = r.string("level")) {
    static constexpr std::string_view levels[] = {"trace", "debug", "info", "warn", "error"};
    if (std::find(std::begin(levels), std::end(levels), *level) == std::end(levels))
      r.error("level", quote(*level) + ": expected one of trace, debug, info, warn, error");
    else out.level = *level;
  }
  if (auto access = r.string("access")) {
    if (access->empty()) r.error("access", "must not be empty (\"stdout\" or a file path)");
    else out.access = *access;
  }
  if (auto bytes = r.integer("queue_bytes")) {
    if (*bytes < static_cast<std::int64_t>(log_config::min_queue_bytes) ||
        *bytes > static_cast<std::int64_t>(log_config::max_queue_bytes))
      r.error("queue_bytes", std::to_string(*bytes) + ": must be between " +
                                 std::to_string(log_config::min_queue_bytes) + " and " +
                                 std::to_string(log_config::max_queue_bytes));
    else out.queue_bytes = static_cast<std::size_t>(*bytes);
  }
}

void read_tls(const table_reader& root, tls_config& out, error_list& errors) {
  if (!root.find("tls")) return;
  const toml::table* t = root.table("tls");
  if (!t) return;
  table_reader r(*t, "tls", errors);
  r.reject_unknown({"cert", "key", "generate", "names", "session_tickets", "min_version"});
  auto cert = r.string("cert");
  auto key = r.string("key");
  if (cert) out.cert = *cert;
  if (key) out.key = *key;
  // Only judge the pair when both keys that are present have the right type.
  bool cert_ok = cert || !r.find("cert");
  bool key_ok = key || !r.find("key");
  if (cert_ok && key_ok) {
    if (!out.cert.empty() && out.key.empty())
      r.error("cert", "set without tls.key (set both, or neither for an in-memory certificate)");
    else if (out.cert.empty() && !out.key.empty())
      r.error("key", "set without tls.cert (set both, or neither for an in-memory certificate)");
  }
  if (auto b = r.boolean("generate")) out.generate = *b;
  if (out.generate && out.cert.empty() && cert_ok && key_ok)
    r.error("generate", "needs tls.cert and tls.key: the paths the generated certificate is kept at");
  if (auto names = r.strings("names")) {
    for (const auto& n : *names) {
      const bool ok = !n.empty() && n.size() <= 253 &&
                      std::all_of(n.begin(), n.end(), [](unsigned char c) {
                        return std::isalnum(c) || c == '-' || c == '.' || c == '*';
                      });
      if (!ok) r.error("names", quote(n) + ": not a DNS name");
    }
    out.names = *names;
  }
  if (auto b = r.boolean("session_tickets")) out.session_tickets = *b;
  if (auto v = r.string("min_version")) {
    if (*v == "1.2" || *v == "1.3") out.min_version = *v;
    else r.error("min_version", quote(*v) + ": expected \"1.2\" or \"1.3\"");
  }
}

void read_limits(const table_reader& root, limits_config& out, error_list& errors) {
  if (!root.find("limits")) return;
  const toml::table* t = root.table("limits");
  if (!t) return;
  table_reader r(*t, "limits", errors);
  r.reject_unknown({"handshake_timeout_ms", "header_timeout_ms", "connect_timeout_ms", "idle_timeout_ms",
                    "drain_timeout_ms", "max_sessions", "threads", "max_pending", "pending_timeout_ms",
                    "min_rate_bytes", "min_rate_window_ms"});
  auto bounded = [&](std::string_view key, std::int64_t max, std::int64_t min = 1) -> std::optional<std::int64_t> {
    auto v = r.integer(key);
    if (!v) return std::nullopt;
    if (*v < min || *v > max) {
      r.error(key, std::to_string(*v) + ": must be between " + std::to_string(min) + " and " + std::to_string(max));
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
  ms("drain_timeout_ms", out.drain_timeout);
  if (auto v = bounded("max_sessions", 1'000'000)) out.max_sessions = static_cast<std::uint32_t>(*v);
  if (auto v = bounded("threads", limits_config::max_threads)) out.threads = static_cast<unsigned>(*v);
  if (auto v = bounded("max_pending", 1'000'000)) out.max_pending = static_cast<std::uint32_t>(*v);
  ms("pending_timeout_ms", out.pending_timeout);
  if (auto v = bounded("min_rate_bytes", 1 << 30, 0)) out.min_rate_bytes = static_cast<std::uint32_t>(*v);
  ms("min_rate_window_ms", out.min_rate_window);
}

void read_destinations(const table_reader& root, destinations_config& out, error_list& errors) {
  if (!root.find("destinations")) return;
  const toml::table* t = root.table("destinations");
  if (!t) return;
  table_reader r(*t, "destinations", errors);
  r.reject_unknown({"allow"});
  if (!r.find("allow")) return;
  const toml::node* n = r.find("allow");
  if (!n->is_array()) {
    r.error("allow", std::string("expected an array of strings, got ") + std::string(type_name(n->type())));
    return;
  }
  const toml::array& arr = *n->as_array();
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& item = *arr.get(i);
    const std::string key = index_path(r.key_path("allow"), i);
    if (!item.is_string()) {
      errors.add(line_of(item.source()), key,
                 std::string("expected a string, got ") + std::string(type_name(item.type())));
      continue;
    }
    const std::string& text = item.as_string()->get();
    ip_network net;
    std::string reason;
    if (parse_ip_network(text, net, reason)) out.allow.push_back(net);
    else errors.add(line_of(item.source()), key, quote(text) + ": " + reason);
  }
}

// Returns how many [[users]] entries the file declares, valid or not: an entry with a typo must
// not make the daemon invent a random user or claim that no user was configured.
std::size_t read_users(const table_reader& root, std::vector<user_config>& out, error_list& errors) {
  const toml::array* arr = root.array_of_tables("users");
  if (!arr) return root.find("users") ? 1 : 0;
  struct seen_user {
    std::string key;
    std::uint32_t line;
  };
  std::vector<std::pair<std::string, seen_user>> names;
  std::vector<std::pair<uuid_bytes, seen_user>> uuids;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const toml::node& n = *arr->get(i);
    std::string path = index_path("users", i);
    if (!n.is_table()) {
      errors.add(line_of(n.source()), path,
                 std::string("expected a table, got ") + std::string(type_name(n.type())));
      continue;
    }
    table_reader r(*n.as_table(), path, errors);
    r.reject_unknown({"name", "uuid"});
    user_config u;
    bool ok = true;
    if (auto name = r.required_string("name")) {
      if (std::any_of(name->begin(), name->end(),
                      [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
        r.error("name", quote(*name) + ": must not contain spaces or control characters");
        ok = false;
      } else if (name->size() > 64) {
        r.error("name", quote(*name) + ": longer than 64 bytes");
        ok = false;
      } else {
        auto dup = std::find_if(names.begin(), names.end(), [&](auto& p) { return p.first == *name; });
        if (dup != names.end()) {
          r.error("name", quote(*name) + ": duplicate user name (first used by " + dup->second.key +
                              " on line " + std::to_string(dup->second.line) + ")");
          ok = false;
        } else {
          names.emplace_back(*name, seen_user{r.key_path("name"), r.line("name")});
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
          r.error("uuid", quote(*text) + ": duplicate UUID (first used by " + dup->second.key +
                              " on line " + std::to_string(dup->second.line) + ")");
          ok = false;
        } else {
          uuids.emplace_back(*bytes, seen_user{r.key_path("uuid"), r.line("uuid")});
        }
        u.uuid = *bytes;
        u.uuid_text = vless::format_uuid(*bytes);
      } else {
        r.error("uuid", quote(*text) + ": not a UUID (expected 8-4-4-4-12 hex digits)");
        ok = false;
      }
    } else {
      ok = false;
    }
    if (ok) out.push_back(std::move(u));
  }
  return arr->size();
}

class listener_registry {
 public:
  // Returns false when the name or endpoint clashes with an earlier listener.
  bool add(const table_reader& r, const listener_fields& f) {
    bool ok = true;
    if (f.name) {
      auto dup = std::find_if(seen_.begin(), seen_.end(), [&](auto& s) { return s.name == *f.name; });
      if (dup != seen_.end()) {
        r.error("name", quote(*f.name) + ": duplicate listener name (first used by " + dup->name_key +
                            " on line " + std::to_string(dup->name_line) + ")");
        ok = false;
      }
    }
    if (f.listen) {
      auto dup = std::find_if(seen_.begin(), seen_.end(),
                              [&](auto& s) { return s.listen && endpoints_clash(*s.listen, *f.listen); });
      if (dup != seen_.end()) {
        std::string what = *dup->listen == *f.listen ? "already used by " : "overlaps ";
        r.error("listen", quote(format_endpoint(*f.listen)) + ": " + what + dup->listen_key + " " +
                              quote(format_endpoint(*dup->listen)) + " on line " +
                              std::to_string(dup->listen_line));
        ok = false;
      }
    }
    seen_.push_back(listener_seen{f.name.value_or(""), r.key_path("name"), r.line("name"), f.listen,
                                  r.key_path("listen"), r.line("listen")});
    return ok;
  }

 private:
  std::vector<listener_seen> seen_;
};

struct exposed_listener {
  std::string name;
  asio::ip::tcp::endpoint listen;
  std::uint32_t line;
};

config validate(const toml::table& root_table, std::string_view source_name) {
  error_list errors(source_name);
  config cfg;
  cfg.source = std::string(source_name);
  table_reader root(root_table, "", errors);
  root.reject_unknown({"log", "tls", "users", "vless", "target", "limits", "destinations"});

  read_log(root, cfg.log, errors);
  read_tls(root, cfg.tls, errors);
  read_limits(root, cfg.limits, errors);
  read_destinations(root, cfg.destinations, errors);
  std::size_t declared_users = read_users(root, cfg.users, errors);

  listener_registry registry;
  std::optional<exposed_listener> first_exposed;
  std::size_t declared_listeners = 0;
  auto note_exposure = [&](const table_reader& r, const listener_fields& f) {
    if (f.listen && f.name && !is_loopback(f.listen->address()) && !first_exposed)
      first_exposed = exposed_listener{*f.name, *f.listen, r.line("listen")};
  };

  if (const toml::array* arr = root.array_of_tables("vless")) {
    for (std::size_t i = 0; i < arr->size(); ++i, ++declared_listeners) {
      const toml::node& n = *arr->get(i);
      std::string path = index_path("vless", i);
      if (!n.is_table()) {
        errors.add(line_of(n.source()), path,
                   std::string("expected a table, got ") + std::string(type_name(n.type())));
        continue;
      }
      table_reader r(*n.as_table(), path, errors);
      r.reject_unknown({"name", "listen", "tcp", "upstream_tcp"});
      listener_fields f = read_listener_common(r);
      auto tcp = read_tcp_policy(r, "tcp", errors);
      auto upstream = read_tcp_policy(r, "upstream_tcp", errors);
      bool unique = registry.add(r, f);
      note_exposure(r, f);
      if (f.name && f.listen && tcp && upstream && unique)
        cfg.vless.push_back(vless_listener_config{*f.name, *f.listen, *tcp, *upstream});
    }
  } else if (root.find("vless")) {
    ++declared_listeners;
  }

  if (const toml::array* arr = root.array_of_tables("target")) {
    for (std::size_t i = 0; i < arr->size(); ++i, ++declared_listeners) {
      const toml::node& n = *arr->get(i);
      std::string path = index_path("target", i);
      if (!n.is_table()) {
        errors.add(line_of(n.source()), path,
                   std::string("expected a table, got ") + std::string(type_name(n.type())));
        continue;
      }
      table_reader r(*n.as_table(), path, errors);
      r.reject_unknown({"name", "listen", "tcp"});
      listener_fields f = read_listener_common(r);
      auto tcp = read_tcp_policy(r, "tcp", errors);
      bool unique = registry.add(r, f);
      note_exposure(r, f);
      if (f.name && f.listen && tcp && unique)
        cfg.target.push_back(target_listener_config{*f.name, *f.listen, *tcp});
    }
  } else if (root.find("target")) {
    ++declared_listeners;
  }

  if (declared_listeners == 0)
    errors.add(1, "vless", "no listeners: add at least one [[vless]] or [[target]] entry");

  // DESIGN.md §3: a random UUID is only acceptable while nobody else can reach the daemon.
  if (declared_users == 0) {
    if (first_exposed) {
      errors.add(first_exposed->line, "users",
                 "listening on " + format_endpoint(first_exposed->listen) + " (listener " +
                     first_exposed->name + ") requires at least one [[users]] entry");
    } else {
      cfg.users.push_back(random_user("default"));
    }
  }

  if (!errors.empty()) throw config_error(errors.sorted());
  return cfg;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Input that trips a toml++ 3.3 precondition, found before toml++ sees it.
struct toml_defect {
  enum kind { broken_header, stray_brace } what;
  std::size_t offset;  // broken_header: start of the header's line; stray_brace: the '}'
  std::uint32_t line;
  std::string description;
};

// toml++ 3.3 asserts (debug) or assumes (release, i.e. undefined behaviour) two things malformed
// input can break: the first non-blank character of a table header starts a key ("[{", "[ [",
// "[" + newline break it; fixed upstream in marzer/tomlplusplus#301), and a '}' never stands
// where an array expects a value ("a = [1, }"). This scanner finds the first such spot. It only
// has to be exact for text that is valid TOML up to that spot, since toml++ stops at its first
// error: it tracks strings, comments and open arrays/inline tables, which is all that decides
// where a header can start and what a '}' closes.
std::optional<toml_defect> find_toml_defect(std::string_view text) {
  const std::size_t n = text.size();
  std::uint32_t line = 1;
  std::size_t line_offset = 0;
  std::string open;  // '[' and '{' not yet closed
  bool line_start = true;
  std::size_t i = 0;
  auto newline = [&](std::size_t at) {
    ++line;
    line_offset = at + 1;
  };
  while (i < n) {
    const char c = text[i];
    if (c == '\n') {
      newline(i);
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    const bool at_start = line_start;
    line_start = false;
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool basic = c == '"';
      const bool multiline = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
      i += multiline ? 3 : 1;
      while (i < n) {
        if (basic && text[i] == '\\') {
          if (i + 1 < n && text[i + 1] == '\n') newline(i + 1);
          i += 2;
          continue;
        }
        if (text[i] == '\n') {
          if (!multiline) break;  // invalid TOML; toml++ reports it
          newline(i);
        }
        if (text[i] == c) {
          if (!multiline) {
            ++i;
            break;
          }
          std::size_t run = 0;
          while (i + run < n && text[i + run] == c) ++run;
          if (run >= 3) {
            i += std::min<std::size_t>(run, 5);  // up to two quotes may end the content
            break;
          }
          i += run;
          continue;
        }
        ++i;
      }
      continue;
    }
    if (c == '[' && open.empty() && at_start) {
      std::size_t j = i + 1;
      if (j < n && text[j] == '[') ++j;
      while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
      if (j < n) {
        const char k = text[j];
        const bool key_start = (k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || (k >= '0' && k <= '9') ||
                               k == '_' || k == '-' || k == '"' || k == '\'';
        if (!key_start) {
          return toml_defect{toml_defect::broken_header, line_offset, line,
                               "Error while parsing table header: expected a key, saw " +
                                   quote(std::string_view(&text[j], 1))};
        }
      }
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '}' && !open.empty() && open.back() == '[')
      return toml_defect{toml_defect::stray_brace, i, line, ""};
    if (c == '[' || c == '{') open += c;
    else if ((c == ']' || c == '}') && !open.empty()) open.pop_back();
    ++i;
  }
  return std::nullopt;
}

}  // namespace

config_error::config_error(std::vector<std::string> errors)
    : std::runtime_error(join_lines(errors)), errors_(std::move(errors)) {}

// parse_endpoint and format_endpoint: core/net_address.cpp.

namespace {

// a with every bit past the first prefix bits cleared; IPv6 scope ids are dropped.
asio::ip::address network_part(const asio::ip::address& a, unsigned prefix) {
  if (a.is_v4()) {
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - std::min(prefix, 32u));
    return asio::ip::address_v4(a.to_v4().to_uint() & mask);
  }
  auto bytes = a.to_v6().to_bytes();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::size_t first_bit = i * 8;
    const unsigned bits = prefix > first_bit ? static_cast<unsigned>(std::min<std::size_t>(8, prefix - first_bit)) : 0;
    bytes[i] = static_cast<std::uint8_t>(bytes[i] & (bits == 0 ? 0 : 0xff << (8 - bits)));
  }
  return asio::ip::address_v6(bytes);
}

}  // namespace

bool ip_network::contains(const asio::ip::address& a) const {
  return a.is_v4() == address.is_v4() && network_part(a, prefix) == address;
}

bool parse_ip_network(std::string_view text, ip_network& out, std::string& reason) {
  const auto slash = text.find('/');
  const std::string host(text.substr(0, slash));
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec || host.empty() || host.find('%') != std::string::npos) {
    reason = "not an IP address or CIDR network (e.g. \"10.0.0.0/8\", \"fd00::/8\", \"0.0.0.0/0\")";
    return false;
  }
  const unsigned max_prefix = address.is_v4() ? 32 : 128;
  unsigned prefix = max_prefix;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    if (!all_digits(digits) || digits.size() > 3) {
      reason = "prefix length must be a number";
      return false;
    }
    prefix = static_cast<unsigned>(std::stoul(std::string(digits)));
    if (prefix > max_prefix) {
      reason = "prefix length out of range (0.." + std::to_string(max_prefix) + ")";
      return false;
    }
  }
  // The network address itself: a set host bit usually means a typo in the address or prefix.
  const ip_network masked{network_part(address, prefix), prefix};
  if (masked.address != address) {
    reason = "host bits set past the prefix (did you mean " + quote(format_ip_network(masked)) + "?)";
    return false;
  }
  out = masked;
  return true;
}

std::string format_ip_network(const ip_network& n) {
  return n.address.to_string() + "/" + std::to_string(n.prefix);
}

namespace {

// One toml++ call; nullopt with the syntax error added to errors on failure.
std::optional<toml::table> parse_toml(std::string_view text, std::string_view source_name, error_list& errors) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    errors.add(line_of(e.source()), "syntax", escape_controls(e.description()));
    return std::nullopt;
  }
#else
  toml::parse_result result = toml::parse(text, source_name);
  if (!result) {
    errors.add(line_of(result.error().source()), "syntax", escape_controls(result.error().description()));
    return std::nullopt;
  }
  return std::move(result).table();
#endif
}

}  // namespace

config parse_config(std::string_view toml_text, std::string_view source_name) {
  error_list errors(source_name);
  std::string patched;
  if (auto defect = find_toml_defect(toml_text)) {
    if (defect->what == toml_defect::broken_header) {
      // toml++ stops at its first error, so an earlier one in the text before the header wins.
      if (parse_toml(toml_text.substr(0, defect->offset), source_name, errors))
        errors.add(defect->line, "syntax", defect->description);
      throw config_error(errors.sorted());
    }
    // ')' is just as invalid there but takes toml++'s ordinary "could not determine value type"
    // path, so the error and its line come from toml++ as for any other typo.
    patched.assign(toml_text);
    patched[defect->offset] = ')';
    toml_text = patched;
  }
  auto root = parse_toml(toml_text, source_name, errors);
  if (!root) throw config_error(errors.sorted());
  return validate(*root, source_name);
}

config load_config_file(const std::filesystem::path& file) {
  auto fail = [&](int err) {
    return config_error({file.string() + ": cannot read: " + std::strerror(err)});
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (that would block a reload, --check
  // and the whole daemon); anything but a regular file is refused before it is read.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw fail(errno);
  struct stat st{};
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
  cfg.target.push_back({"http", {loopback, 8080}, kernel});
  cfg.users.push_back(random_user("default"));
  cfg.source = "<embedded default>";
  return cfg;
}

}  // namespace vlessbench
