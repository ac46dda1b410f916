#include "core/wire/transport_config.hpp"

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

}  // namespace

std::string_view to_string(transport_kind k) {
  switch (k) {
    case transport_kind::tls: return "tls";
    case transport_kind::ws: return "ws";
    case transport_kind::httpupgrade: return "httpupgrade";
    case transport_kind::grpc: return "grpc";
  }
  return "tls";
}

std::string describe(const transport_config& t) {
  std::string out(to_string(t.kind));
  if (t.kind == transport_kind::ws || t.kind == transport_kind::httpupgrade) {
    out += " path=" + t.path;
    if (!t.host.empty()) out += " host=" + t.host;
  }
  if (t.kind == transport_kind::ws && t.max_early_data > 0) {
    out += " early_data=" + std::to_string(t.max_early_data);
    if (!t.early_data_header.empty()) out += " early_data_header=" + t.early_data_header;
  }
  if (t.kind == transport_kind::grpc) out += " service=" + t.service_name;
  if (t.kind != transport_kind::tls && !t.tls) out += " plain";
  return out;
}

std::vector<std::pair<std::string, std::string>> validate_transport(const transport_keys& keys,
                                                                    transport_config& out) {
  std::vector<std::pair<std::string, std::string>> errors;
  out = transport_config{};
  if (keys.transport) {
    if (*keys.transport == "tls") out.kind = transport_kind::tls;
    else if (*keys.transport == "ws") out.kind = transport_kind::ws;
    else if (*keys.transport == "httpupgrade") out.kind = transport_kind::httpupgrade;
    else if (*keys.transport == "grpc") out.kind = transport_kind::grpc;
    else errors.emplace_back("transport", "\"" + *keys.transport + "\": expected \"tls\", \"ws\", \"httpupgrade\" or \"grpc\"");
  }
  const bool upgrade = out.kind == transport_kind::ws || out.kind == transport_kind::httpupgrade;
  auto only_upgrade = [&](const char* key, bool present) {
    if (present && !upgrade) errors.emplace_back(key, "only for transport = \"ws\" or \"httpupgrade\"");
  };
  if (keys.tls && out.kind == transport_kind::tls)
    errors.emplace_back("tls", "only for transport = \"ws\", \"httpupgrade\" or \"grpc\"");
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
    if (*keys.max_early_data < 0 || *keys.max_early_data > transport_config::max_early_data_limit)
      errors.emplace_back("max_early_data", "expected 0.." + std::to_string(transport_config::max_early_data_limit) + " bytes");
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

}  // namespace vlessbench
