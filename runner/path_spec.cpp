#include "runner/path_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>

#include "core/wire/net_address.hpp"

namespace vlessbench::runner {

namespace {

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// Names end up in CSV cells, HTTP header values and SVG text: keep them plain.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::optional<std::uint32_t> parse_post_interval(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (v > 10'000) return std::nullopt;
  return v;
}

// Removes the runner's own parameters from a vless:// link's query before the share-link parser
// sees it, so the link stays importable elsewhere.
bool extract_runner_params(std::string& link, path_spec& out, std::string& reason) {
  const auto q = link.find('?');
  if (q == std::string::npos) return true;
  auto end = link.find('#', q);
  if (end == std::string::npos) end = link.size();
  const std::string query = link.substr(q + 1, end - q - 1);
  std::string kept;
  std::size_t pos = 0;
  while (pos <= query.size()) {
    auto amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string item = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "nodelay") {
      bool on = true;
      if (!parse_on_off(value, on)) {
        reason = "nodelay must be on or off, got '" + value + "'";
        return false;
      }
      out.nodelay = on;
    } else if (key == "writes") {
      if (value == "one") {
        out.writes = write_mode::one;
      } else if (value == "split") {
        out.writes = write_mode::split;
      } else {
        reason = "writes must be one or split, got '" + value + "'";
        return false;
      }
    } else if (key == "mux") {
      if (!parse_on_off(value, out.mux)) {
        reason = "mux must be on or off, got '" + value + "'";
        return false;
      }
    } else if (key == "muxnew") {
      if (value == "sub") {
        out.mux_new = mux_new_mode::sub;
      } else if (value == "connection") {
        out.mux_new = mux_new_mode::connection;
      } else {
        reason = "muxnew must be sub or connection, got '" + value + "'";
        return false;
      }
    } else if (key == "postinterval") {
      // xhttp packet-up: the least milliseconds between two uplink POSTs (Xray's scMinPostsIntervalMs).
      const auto ms = parse_post_interval(value);
      if (!ms) {
        reason = "postinterval must be milliseconds 0..10000, got '" + value + "'";
        return false;
      }
      out.xhttp_post_interval_ms = *ms;
    } else {
      // packetEncoding is the share link's own (Xray, v2rayN): read here, kept in the link.
      if (key == "packetEncoding") {
        if (value == "xudp") {
          out.xudp = true;
        } else if (value != "none" && !value.empty()) {
          reason = "packetEncoding must be xudp or none, got '" + value + "'";
          return false;
        }
      }
      if (!kept.empty()) kept += '&';
      kept += item;
    }
  }
  link = link.substr(0, q) + (kept.empty() ? "" : "?" + kept) + link.substr(end);
  return true;
}

}  // namespace

std::string_view to_string(path_kind k) {
  switch (k) {
    case path_kind::direct: return "direct";
    case path_kind::http_connect: return "http-connect";
    case path_kind::socks5: return "socks5";
    case path_kind::vless: return "vless";
    case path_kind::forward: return "forward";
    case path_kind::tun: return "tun";
    case path_kind::tls: return "tls";
  }
  return "?";
}

std::string_view to_string(mux_new_mode m) { return m == mux_new_mode::sub ? "sub" : "connection"; }

std::string_view to_string(write_mode w) { return w == write_mode::one ? "one" : "split"; }

bool parse_on_off(std::string_view text, bool& out) {
  if (text == "on" || text == "1" || text == "true" || text == "yes") {
    out = true;
    return true;
  }
  if (text == "off" || text == "0" || text == "false" || text == "no") {
    out = false;
    return true;
  }
  return false;
}

vless_client_options path_spec::client_options(const vless_client_options& defaults) const {
  vless_client_options o = defaults;
  if (nodelay) o.nodelay = *nodelay;
  if (writes) o.writes = *writes;
  return o;
}

std::string target_url::authority() const { return format_host_port(host, port); }

std::string_view to_string(target_scheme s) {
  switch (s) {
    case target_scheme::http: return "http";
    case target_scheme::https: return "https";
    case target_scheme::banner: return "banner";
    case target_scheme::udp: return "udp";
    case target_scheme::dns: return "dns";
    case target_scheme::ntp: return "ntp";
    case target_scheme::stun: return "stun";
  }
  return "?";
}

bool is_datagram(target_scheme s) {
  return s == target_scheme::udp || s == target_scheme::dns || s == target_scheme::ntp || s == target_scheme::stun;
}

bool check_paths_for_target(const std::vector<path_spec>& paths, const target_url& target, std::string& reason) {
  if (!is_datagram(target.scheme)) return true;
  for (const auto& p : paths) {
    if (p.kind == path_kind::direct || p.kind == path_kind::socks5 || p.kind == path_kind::vless) continue;
    reason = "path '" + p.name + "' (" + std::string(to_string(p.kind)) + ") cannot carry a " +
             std::string(to_string(target.scheme)) +
             ":// target: UDP goes over direct, socks5://H:P (UDP ASSOCIATE) or vless:// (UDP command) paths";
    return false;
  }
  return true;
}

std::string_view to_string(bulk_direction d) {
  switch (d) {
    case bulk_direction::none: return "";
    case bulk_direction::down: return "down";
    case bulk_direction::up: return "up";
  }
  return "?";
}

std::vector<path_spec> bulk_paths(const std::vector<path_spec>& paths) {
  std::vector<path_spec> out;
  out.reserve(paths.size() * 2);
  for (const auto d : {bulk_direction::down, bulk_direction::up}) {
    for (const auto& p : paths) {
      out.push_back(p);
      out.back().name = p.name + "/" + std::string(to_string(d));
      out.back().bulk = d;
    }
  }
  return out;
}

namespace {

// A dns:// target's NAME, lower case without its final dot: whether it is a DNS name (labels of
// 1-63 letters, digits, '-' or '_', 253 characters at most).
bool normalize_dns_name(std::string& name) {
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool ok = !name.empty() && name.size() <= 253;
  std::size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      ok = ok && label > 0;
      label = 0;
    } else {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
      ++label;
      ok = ok && label <= 63;
    }
  }
  return ok && label > 0;
}

bool takes_no_path(target_scheme s) {
  return s == target_scheme::banner || s == target_scheme::udp || s == target_scheme::ntp || s == target_scheme::stun;
}

}  // namespace

std::optional<target_url> parse_target_url(std::string_view text, std::string& reason) {
  // Each scheme with its default port (0: none, the URL must name one).
  static constexpr std::array<std::tuple<std::string_view, target_scheme, std::uint16_t>, 7> schemes{{
      {"http://", target_scheme::http, 80},
      {"https://", target_scheme::https, 443},
      {"banner://", target_scheme::banner, 0},
      {"udp://", target_scheme::udp, 0},
      {"dns://", target_scheme::dns, 53},
      {"ntp://", target_scheme::ntp, 123},
      {"stun://", target_scheme::stun, 3478},
  }};
  target_url url;
  std::size_t scheme_len = 0;
  for (const auto& [prefix, scheme, port] : schemes) {
    if (!starts_with_icase(text, prefix)) continue;
    url.scheme = scheme;
    url.port = port;
    scheme_len = prefix.size();
    break;
  }
  if (scheme_len == 0) {
    reason = "target must be an http, https, banner, udp, dns, ntp or stun URL (got '" + std::string(text) + "')";
    return std::nullopt;
  }
  std::string_view rest = text.substr(scheme_len);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const bool no_path = takes_no_path(url.scheme);
  if (no_path && slash != std::string_view::npos && slash + 1 != rest.size()) {
    reason = "a " + std::string(to_string(url.scheme)) + ":// target has no path";
    return std::nullopt;
  }
  if (url.scheme == target_scheme::dns) {
    std::string name = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
    if (!normalize_dns_name(name)) {
      reason =
          "a dns:// target is dns://HOST[:PORT]/NAME with NAME a DNS name (labels of 1-63 letters, digits, '-' or "
          "'_'), got '" +
          std::string(text) + "'";
      return std::nullopt;
    }
    url.dns_name = std::move(name);
  }
  url.path =
      slash == std::string_view::npos || url.scheme == target_scheme::dns ? "/" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) {
    reason = "credentials in the target URL are not supported";
    return std::nullopt;
  }
  const bool has_port =
      !authority.empty() && (authority.front() == '[' ? authority.find("]:") != std::string_view::npos
                                                      : authority.find(':') != std::string_view::npos);
  if (has_port) {
    auto hp = parse_host_port(authority, host_rule::name_or_address, reason);
    if (!hp) {
      reason = "target '" + std::string(authority) + "': " + reason;
      return std::nullopt;
    }
    url.host = std::move(hp->host);
    url.port = hp->port;
  } else {
    url.host = std::string(authority);
    if (url.host.size() >= 2 && url.host.front() == '[' && url.host.back() == ']')
      url.host = url.host.substr(1, url.host.size() - 2);
  }
  if (url.host.empty()) {
    reason = "target URL has no host";
    return std::nullopt;
  }
  if (url.port == 0) {
    reason = "a " + std::string(to_string(url.scheme)) + ":// target needs a port (" +
             std::string(to_string(url.scheme)) + "://HOST:PORT)";
    return std::nullopt;
  }
  if (url.path.find_first_of(" \r\n") != std::string::npos) {
    reason = "target path contains whitespace";
    return std::nullopt;
  }
  return url;
}

namespace {

// What a link parses to that the built-in client cannot dial, with what to use instead.
std::optional<std::string> builtin_client_refuses(const share_link& link) {
  if (link.reality)
    return "the built-in client does not speak REALITY (security=reality); measure it through Xray or mihomo "
           "(vlessbench clients) or a client's proxy port";
  return std::nullopt;
}

}  // namespace

std::optional<path_spec> parse_path_arg(std::string_view arg, std::string& reason) {
  const auto eq = arg.find('=');
  if (eq == std::string_view::npos) {
    reason = "expected NAME=SPEC, got '" + std::string(arg) + "'";
    return std::nullopt;
  }
  path_spec p;
  p.name = std::string(arg.substr(0, eq));
  p.spec = std::string(arg.substr(eq + 1));
  if (!valid_name(p.name)) {
    reason = "path name '" + p.name + "' must be 1-64 characters of A-Z a-z 0-9 - _ .";
    return std::nullopt;
  }
  std::string_view spec = p.spec;
  auto strip_slash = [](std::string_view s) {
    if (!s.empty() && s.back() == '/') s.remove_suffix(1);
    return s;
  };
  if (spec == "direct") {
    p.kind = path_kind::direct;
  } else if (spec == "tun") {
    p.kind = path_kind::tun;
  } else if (starts_with_icase(spec, "http://") || starts_with_icase(spec, "socks5://") ||
             starts_with_icase(spec, "tcp://") || starts_with_icase(spec, "tun://") ||
             starts_with_icase(spec, "tls://")) {
    p.kind = starts_with_icase(spec, "http://")  ? path_kind::http_connect
             : starts_with_icase(spec, "tcp://") ? path_kind::forward
             : starts_with_icase(spec, "tun://") ? path_kind::tun
             : starts_with_icase(spec, "tls://") ? path_kind::tls
                                                 : path_kind::socks5;
    const std::string_view hp = strip_slash(spec.substr(spec.find("://") + 3));
    if (hp.find('@') != std::string_view::npos) {
      reason = "path '" + p.name + "': proxy authentication is not supported";
      return std::nullopt;
    }
    if (hp.find('/') != std::string_view::npos) {
      reason = "path '" + p.name + "': a proxy SPEC is only scheme://HOST:PORT";
      return std::nullopt;
    }
    auto server = parse_host_port(hp, host_rule::name_or_address, reason);
    if (!server) {
      reason = "path '" + p.name + "': '" + std::string(hp) + "': " + reason;
      return std::nullopt;
    }
    p.host = std::move(server->host);
    p.port = server->port;
  } else if (starts_with_icase(spec, "vless://")) {
    p.kind = path_kind::vless;
    std::string link(spec);
    if (!extract_runner_params(link, p, reason)) {
      reason = "path '" + p.name + "': " + reason;
      return std::nullopt;
    }
    std::string why;
    auto parsed = parse_share_link(link, why);
    if (!parsed) {
      reason = "path '" + p.name + "': bad vless link: " + why;
      return std::nullopt;
    }
    // parse_share_link refuses what the client cannot dial (security, type, a flow other than
    // Vision over raw TLS).
    if (const auto why_not = builtin_client_refuses(*parsed)) {
      reason = "path '" + p.name + "': " + *why_not;
      return std::nullopt;
    }
    if (p.xhttp_post_interval_ms && parsed->transport.kind != transport_kind::xhttp) {
      reason = "path '" + p.name + "': postinterval is for type=xhttp links only";
      return std::nullopt;
    }
    p.host = parsed->host;
    p.port = parsed->port;
    p.link = std::move(parsed);
  } else {
    reason = "path '" + p.name +
             "': SPEC must be direct, http://H:P, socks5://H:P, tcp://H:P, tls://H:P, tun, tun://H:P or vless://...";
    return std::nullopt;
  }
  return p;
}

std::optional<std::size_t> finalize_paths(std::vector<path_spec>& paths, std::string& reason) {
  for (std::size_t i = 0; i < paths.size(); ++i)
    for (std::size_t j = i + 1; j < paths.size(); ++j)
      if (paths[i].name == paths[j].name) {
        reason = "path name '" + paths[i].name + "' is used twice";
        return std::nullopt;
      }
  const auto it =
      std::find_if(paths.begin(), paths.end(), [](const path_spec& p) { return p.kind == path_kind::direct; });
  if (it != paths.end()) return static_cast<std::size_t>(it - paths.begin());
  if (std::any_of(paths.begin(), paths.end(), [](const path_spec& p) { return p.name == "direct"; })) {
    reason = "a non-direct path is named 'direct'; the baseline needs that name";
    return std::nullopt;
  }
  path_spec direct;
  direct.name = "direct";
  direct.spec = "direct";
  paths.insert(paths.begin(), std::move(direct));
  return 0;
}

bool apply_nagle_paths(std::vector<path_spec>& paths, const std::vector<std::string>& names, std::string& reason) {
  for (const auto& name : names) {
    const auto it = std::find_if(paths.begin(), paths.end(), [&](const path_spec& p) { return p.name == name; });
    if (it == paths.end() || it->kind != path_kind::vless) {
      reason = "'" + name + "' is not the name of a vless:// --path";
      return false;
    }
    it->nodelay = false;
    it->writes = write_mode::split;
  }
  return true;
}

}  // namespace vlessbench::runner
