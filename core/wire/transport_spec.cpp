#include "core/wire/transport_spec.hpp"

namespace vlessbench {

namespace {

// RFC 9110 token characters: a header name.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

// An origin-form path: starts with '/', no query, no whitespace or control bytes.
bool is_path(std::string_view s) {
  if (s.empty() || s.front() != '/') return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' || c == '#') return false;
  return true;
}

// A gRPC service name: what goes between the slashes of /<service>/Tun. RFC 3986 unreserved
// characters only (a package-qualified name like "example.Gun" included), at most 128.
bool is_service_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.' && c != '_' && c != '~') return false;
  }
  return true;
}

constexpr transport_kind all_kinds[] = {transport_kind::tls, transport_kind::ws, transport_kind::httpupgrade,
                                        transport_kind::grpc, transport_kind::xhttp};

// "FROM-TO" byte counts, FROM <= TO <= limit.
std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_range(std::string_view s, std::uint32_t limit) {
  auto number = [](std::string_view t) -> std::optional<std::uint32_t> {
    if (t.empty() || t.size() > 9) return std::nullopt;
    std::uint32_t v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    return v;
  };
  const auto dash = s.find('-');
  const auto from = number(s.substr(0, dash));
  const auto to = dash == std::string_view::npos ? from : number(s.substr(dash + 1));
  if (!from || !to || *from > *to || *to > limit) return std::nullopt;
  return std::pair{*from, *to};
}

// The xhttp keys (validate_transport's part for them).
void validate_xhttp(const transport_keys& keys, transport_spec& out,
                    std::vector<std::pair<std::string, std::string>>& errors) {
  const bool xhttp = out.kind == transport_kind::xhttp;
  auto only = [&](const char* key, bool present) {
    if (present && !xhttp) errors.emplace_back(key, "only for transport = \"xhttp\"");
    return present && xhttp;
  };
  if (only("mode", keys.mode.has_value())) {
    if (const auto m = xhttp::mode_named(*keys.mode))
      out.xhttp_mode = *m;
    else
      errors.emplace_back("mode",
                          "\"" + *keys.mode + "\": expected \"auto\", \"packet-up\", \"stream-up\" or \"stream-one\"");
  }
  if (only("padding_bytes", keys.padding_bytes.has_value())) {
    if (const auto r = parse_range(*keys.padding_bytes, 8192)) {
      out.padding_min = r->first;
      out.padding_max = r->second;
    } else {
      errors.emplace_back("padding_bytes",
                          "\"" + *keys.padding_bytes + "\": expected \"FROM-TO\" bytes, FROM <= TO <= 8192");
    }
  }
  auto bounded = [&](const char* key, const std::optional<std::int64_t>& v, std::int64_t lo, std::int64_t hi,
                     std::uint32_t& field) {
    if (!only(key, v.has_value())) return;
    if (*v < lo || *v > hi)
      errors.emplace_back(key, "expected " + std::to_string(lo) + ".." + std::to_string(hi));
    else
      field = static_cast<std::uint32_t>(*v);
  };
  bounded("max_post_bytes", keys.max_post_bytes, 16384, 16 << 20, out.max_post_bytes);
  bounded("max_buffered_posts", keys.max_buffered_posts, 1, 1024, out.max_buffered_posts);
  bounded("session_timeout_ms", keys.session_timeout_ms, 100, 600'000, out.session_timeout_ms);
}

// The kind whose name (as spelling names it: the config's or a link's) is name.
std::optional<transport_kind> kind_named(std::string_view name, std::string_view (*spelling)(transport_kind)) {
  for (const auto k : all_kinds)
    if (spelling(k) == name) return k;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(transport_kind k) {
  switch (k) {
    case transport_kind::tls: return "tls";
    case transport_kind::ws: return "ws";
    case transport_kind::httpupgrade: return "httpupgrade";
    case transport_kind::grpc: return "grpc";
    case transport_kind::xhttp: return "xhttp";
  }
  return "tls";
}

std::string_view link_type(transport_kind k) { return k == transport_kind::tls ? "tcp" : to_string(k); }

std::string describe(const transport_spec& t) {
  std::string out(to_string(t.kind));
  if (t.has_path()) {
    out += " path=" + t.path;
    if (!t.host.empty()) out += " host=" + t.host;
  }
  if (t.kind == transport_kind::ws && t.max_early_data > 0) {
    out += " early_data=" + std::to_string(t.max_early_data);
    if (!t.early_data_header.empty()) out += " early_data_header=" + t.early_data_header;
  }
  if (t.kind == transport_kind::grpc) out += " service=" + t.service_name;
  if (t.kind == transport_kind::grpc && t.grpc_multi) out += " multi";
  if (t.kind == transport_kind::xhttp) {
    out += " mode=" + std::string(xhttp::to_string(t.xhttp_mode));
    out += " padding=" + std::to_string(t.padding_min) + "-" + std::to_string(t.padding_max);
  }
  if (t.kind != transport_kind::tls && !t.tls) out += " plain";
  return out;
}

std::vector<std::pair<std::string, std::string>> validate_transport(const transport_keys& keys, transport_spec& out) {
  std::vector<std::pair<std::string, std::string>> errors;
  out = transport_spec{};
  if (keys.transport) {
    if (const auto kind = kind_named(*keys.transport, to_string))
      out.kind = *kind;
    else
      errors.emplace_back(
          "transport", "\"" + *keys.transport + "\": expected \"tls\", \"ws\", \"httpupgrade\", \"grpc\" or \"xhttp\"");
  }
  const bool upgrade = out.has_path();
  auto only_upgrade = [&](const char* key, bool present) {
    if (present && !upgrade) errors.emplace_back(key, "only for transport = \"ws\", \"httpupgrade\" or \"xhttp\"");
  };
  if (keys.tls && out.kind == transport_kind::tls)
    errors.emplace_back("tls", "only for transport = \"ws\", \"httpupgrade\", \"grpc\" or \"xhttp\"");
  validate_xhttp(keys, out, errors);
  if (keys.service_name && out.kind != transport_kind::grpc)
    errors.emplace_back("service_name", "only for transport = \"grpc\"");
  if (keys.service_name && out.kind == transport_kind::grpc) {
    if (!is_service_name(*keys.service_name))
      errors.emplace_back("service_name", "\"" + *keys.service_name +
                                              "\": expected 1-128 letters, digits, '-', '.', '_' or '~' (no '/')");
    else
      out.service_name = *keys.service_name;
  }
  only_upgrade("path", keys.path.has_value());
  only_upgrade("host", keys.host.has_value());
  if ((keys.max_early_data || keys.early_data_header) && out.kind != transport_kind::ws)
    errors.emplace_back(keys.max_early_data ? "max_early_data" : "early_data_header",
                        "only for transport = \"ws\" (httpupgrade clients send early data after the head)");
  if (keys.tls) out.tls = *keys.tls;
  if (keys.path) {
    if (!is_path(*keys.path))
      errors.emplace_back("path", "\"" + *keys.path + "\": expected a path starting with '/', without query or spaces");
    else
      out.path = *keys.path;
  }
  if (keys.host) out.host = *keys.host;
  if (keys.max_early_data) {
    if (*keys.max_early_data < 0 || *keys.max_early_data > transport_spec::max_early_data_limit)
      errors.emplace_back("max_early_data",
                          "expected 0.." + std::to_string(transport_spec::max_early_data_limit) + " bytes");
    else
      out.max_early_data = static_cast<std::uint32_t>(*keys.max_early_data);
  }
  if (keys.early_data_header) {
    if (!is_token(*keys.early_data_header))
      errors.emplace_back("early_data_header", "\"" + *keys.early_data_header + "\": not an HTTP header name");
    else
      out.early_data_header = *keys.early_data_header;
  }
  return errors;
}

std::vector<std::pair<std::string_view, std::string>> transport_query(const transport_spec& t) {
  std::vector<std::pair<std::string_view, std::string>> out;
  out.emplace_back("security", t.tls ? "tls" : "none");
  out.emplace_back("type", link_type(t.kind));
  if (t.kind == transport_kind::grpc) {
    out.emplace_back("serviceName", t.service_name);
    if (t.grpc_multi) out.emplace_back("mode", "multi");
  } else if (t.has_path()) {
    out.emplace_back("path", t.path.empty() ? std::string("/") : t.path);
    if (!t.host.empty()) out.emplace_back("host", t.host);
    if (t.kind == transport_kind::xhttp) out.emplace_back("mode", xhttp::to_string(t.xhttp_mode));
    if (t.kind == transport_kind::xhttp && !t.alpn.empty()) out.emplace_back("alpn", t.alpn);
    if (t.kind == transport_kind::ws && t.max_early_data > 0) out.emplace_back("ed", std::to_string(t.max_early_data));
  }
  return out;
}

// size: one rule per link parameter of every transport (type, security, path, host, ed, serviceName,
// mode, alpn), read in one pass so that each refusal names the parameter that caused it
std::optional<transport_spec> parse_transport_query(const query_params& params, std::string& reason) {
  auto param = [&](std::string_view key) -> const std::string* {
    const auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second;
  };
  auto fail = [&](std::string text) {
    reason = std::move(text);
    return std::nullopt;
  };
  transport_spec t;
  const std::string type = param("type") ? *param("type") : "tcp";
  if (const auto kind = kind_named(type, link_type))
    t.kind = *kind;
  else
    return fail("type=" + type + " is not supported: the transports are tcp, ws, httpupgrade, grpc and xhttp");
  const bool grpc = t.kind == transport_kind::grpc;
  if (const auto* v = param("headerType"); v && *v != "none" && !v->empty())
    return fail("headerType=" + *v + " is not supported: no HTTP obfuscation over TCP");

  // Absent means "none" (the proposal's default). Raw TCP is only ever dialled with TLS; ws,
  // httpupgrade and grpc may run without it (a proxy in front terminates TLS).
  const std::string security = param("security") ? *param("security") : "none";
  const bool xhttp = t.kind == transport_kind::xhttp;
  if (security != "tls" && !((t.upgrades() || grpc || xhttp) && security == "none"))
    return fail("security=" + security +
                " is not supported: the built-in client speaks VLESS over TLS only (use security=tls), "
                "or over plain TCP with type=ws, type=httpupgrade, type=grpc or type=xhttp (security=none)");
  t.tls = security == "tls";

  if (t.upgrades()) {
    if (const auto* v = param("path"); v && !v->empty()) t.path = *v;
    if (const auto* v = param("host")) t.host = *v;
    if (t.path.front() != '/') return fail("path=" + t.path + " does not start with '/'");
    // Xray writes early data into the path: /ws?ed=2048.
    std::string ed_text;
    if (const auto q = t.path.find("?ed="); q != std::string::npos) {
      ed_text = t.path.substr(q + 4);
      t.path.erase(q);
      if (t.path.empty()) t.path = "/";
    }
    if (const auto* v = param("ed")) {
      if (!ed_text.empty() && ed_text != *v) return fail("ed= and the path's ?ed= disagree");
      ed_text = *v;
    }
    if (!ed_text.empty()) {
      if (t.kind != transport_kind::ws) return fail("ed= is for type=ws only");
      std::uint32_t ed = 0;
      for (char c : ed_text) {
        if (c < '0' || c > '9' || ed > 100'000) return fail("ed=" + ed_text + " is not a byte count (0..100000)");
        ed = ed * 10 + static_cast<std::uint32_t>(c - '0');
      }
      if (ed > 100'000) return fail("ed=" + ed_text + " is not a byte count (0..100000)");
      t.max_early_data = ed;
    }
  }

  if (xhttp) {
    if (const auto* v = param("path"); v && !v->empty()) t.path = *v;
    if (const auto* v = param("host")) t.host = *v;
    if (t.path.front() != '/') return fail("path=" + t.path + " does not start with '/'");
    for (char c : t.path)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '#')
        return fail("path=" + t.path + " is not a request path");
    if (const auto* v = param("mode"); v && !v->empty()) {
      const auto m = xhttp::mode_named(*v);
      if (!m) return fail("mode=" + *v + " is not an XHTTP mode (auto, packet-up, stream-up or stream-one)");
      t.xhttp_mode = *m;
    }
    if (const auto* v = param("alpn"); v && !v->empty()) {
      // Xray's link lists them comma-separated; one is what an XHTTP client speaks.
      if (*v != "h2" && *v != "http/1.1") return fail("alpn=" + *v + " is not one XHTTP speaks here (h2 or http/1.1)");
      t.alpn = *v;
    }
  }

  if (grpc) {
    if (const auto* v = param("serviceName"); v && !v->empty()) t.service_name = *v;
    // It becomes the request path /<serviceName>/Tun: a '/' or a space would make another path.
    for (char c : t.service_name)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/' || c == '?' || c == '#')
        return fail("serviceName=" + t.service_name + " is not a gRPC service name (no '/', '?', spaces)");
    if (const auto* v = param("ed"); v && !v->empty()) return fail("ed= is for type=ws only");
    if (const auto* v = param("mode"); v && !v->empty() && *v != "gun" && *v != "multi")
      return fail("mode=" + *v + " is not a gRPC mode (gun or multi)");
    t.grpc_multi = param("mode") && *param("mode") == "multi";
  }
  reason.clear();
  return t;
}

}  // namespace vlessbench
