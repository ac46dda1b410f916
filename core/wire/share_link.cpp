#include "core/wire/share_link.hpp"

#include <map>

#include "core/wire/net_address.hpp"
#include "core/wire/percent.hpp"
#include "core/wire/transport_config.hpp"
#include "core/wire/vision.hpp"
#include "core/wire/vless_codec.hpp"

namespace vlessbench {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// The server part as given, for a reason (cut short: a link may be long).
std::string quote_host(std::string_view text) {
  return "'" + std::string(text.substr(0, 80)) + "'";
}

std::optional<share_link> fail(std::string& reason, std::string text) {
  reason = std::move(text);
  return std::nullopt;
}

}  // namespace

std::optional<share_link> parse_share_link(std::string_view text, std::string& reason) {
  constexpr std::string_view scheme = "vless://";
  if (text.size() < scheme.size() || !iequals(text.substr(0, scheme.size()), scheme))
    return fail(reason, "not a vless:// link");
  std::string_view rest = text.substr(scheme.size());

  share_link link;

  std::string_view fragment;
  bool has_fragment = false;
  if (auto hash = rest.find('#'); hash != std::string_view::npos) {
    fragment = rest.substr(hash + 1);
    rest = rest.substr(0, hash);
    has_fragment = true;
  }
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // Some clients write "host:port/?..."; an empty path means the same thing.
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    if (slash + 1 != rest.size()) return fail(reason, "unexpected path after host:port");
    rest = rest.substr(0, slash);
  }
  const std::string_view authority = rest;

  const auto at = authority.find('@');
  if (at == std::string_view::npos) return fail(reason, "missing UUID@ before the host");
  const auto user = percent_decode(authority.substr(0, at));
  if (!user) return fail(reason, "bad percent-encoding in the UUID");
  const auto uuid = vless::parse_uuid(*user);
  if (!uuid) return fail(reason, "bad UUID (want 8-4-4-4-12 hex digits): " + *user);
  link.uuid = *uuid;

  auto server = parse_host_port(authority.substr(at + 1), host_rule::name_or_address, reason);
  if (!server) return fail(reason, "server " + quote_host(authority.substr(at + 1)) + ": " + reason);
  link.host = std::move(server->host);
  link.port = server->port;

  // The proposal forbids repeated keys; a link that says two things is refused, not guessed at.
  std::map<std::string, std::string, std::less<>> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string key(pair.substr(0, eq));
    const auto value =
        percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    if (!value) return fail(reason, "bad percent-encoding in the value of " + key);
    if (!params.emplace(key, *value).second) return fail(reason, "repeated query key: " + key);
  }
  auto param = [&](std::string_view key) -> const std::string* {
    const auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second;
  };

  // Absent means "none" (proposal default); VLESS itself has no encryption.
  if (const auto* v = param("encryption"); v && *v != "none")
    return fail(reason, "encryption=" + *v + " is not supported: VLESS has no encryption, use encryption=none");

  const std::string type = param("type") ? *param("type") : "tcp";
  if (type != "tcp" && type != "ws" && type != "httpupgrade" && type != "grpc")
    return fail(reason, "type=" + type + " is not supported: the transports are tcp, ws, httpupgrade and grpc");
  link.type = type;
  const bool upgrade = type == "ws" || type == "httpupgrade";
  const bool grpc = type == "grpc";
  if (const auto* v = param("headerType"); v && *v != "none" && !v->empty())
    return fail(reason, "headerType=" + *v + " is not supported: no HTTP obfuscation over TCP");

  // Absent means "none" too. Raw TCP is only ever dialled with TLS; ws and httpupgrade may run
  // without it (a proxy in front terminates TLS).
  const std::string security = param("security") ? *param("security") : "none";
  if (security != "tls" && !((upgrade || grpc) && security == "none"))
    return fail(reason, "security=" + security +
                            " is not supported: the built-in client speaks VLESS over TLS only (use security=tls), "
                            "or over plain TCP with type=ws, type=httpupgrade or type=grpc (security=none)");
  link.security = security;

  if (upgrade) {
    link.path = "/";
    if (const auto* v = param("path"); v && !v->empty()) link.path = *v;
    if (const auto* v = param("host")) link.http_host = *v;
    if (!link.path.empty() && link.path.front() != '/') return fail(reason, "path=" + link.path + " does not start with '/'");
    // Xray writes early data into the path: /ws?ed=2048.
    std::string ed_text;
    if (const auto q = link.path.find("?ed="); q != std::string::npos) {
      ed_text = link.path.substr(q + 4);
      link.path.erase(q);
      if (link.path.empty()) link.path = "/";
    }
    if (const auto* v = param("ed")) {
      if (!ed_text.empty() && ed_text != *v) return fail(reason, "ed= and the path's ?ed= disagree");
      ed_text = *v;
    }
    if (!ed_text.empty()) {
      if (type != "ws") return fail(reason, "ed= is for type=ws only");
      std::uint32_t ed = 0;
      for (char c : ed_text) {
        if (c < '0' || c > '9' || ed > 100'000) return fail(reason, "ed=" + ed_text + " is not a byte count (0..100000)");
        ed = ed * 10 + static_cast<std::uint32_t>(c - '0');
      }
      if (ed > 100'000) return fail(reason, "ed=" + ed_text + " is not a byte count (0..100000)");
      link.early_data = ed;
    }
  }

  if (grpc) {
    link.service_name = std::string(transport_config::default_service_name);
    if (const auto* v = param("serviceName"); v && !v->empty()) link.service_name = *v;
    // It becomes the request path /<serviceName>/Tun: a '/' or a space would make another path.
    for (char c : link.service_name)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/' || c == '?' || c == '#')
        return fail(reason, "serviceName=" + link.service_name + " is not a gRPC service name (no '/', '?', spaces)");
    if (const auto* v = param("ed"); v && !v->empty()) return fail(reason, "ed= is for type=ws only");
    if (const auto* v = param("mode"); v && !v->empty() && *v != "gun" && *v != "multi")
      return fail(reason, "mode=" + *v + " is not a gRPC mode (gun or multi)");
    link.grpc_multi = param("mode") && *param("mode") == "multi";
  }

  if (const auto* v = param("flow"); v && !v->empty()) {
    if (*v != vision::flow_name) return fail(reason, "flow=" + *v + " is not supported: only xtls-rprx-vision is");
    if (link.type != "tcp" || link.security != "tls")
      return fail(reason, "flow=xtls-rprx-vision runs on raw TLS only (type=tcp, security=tls)");
    link.flow = *v;
  }

  if (const auto* v = param("sni")) link.sni = *v;

  for (std::string_view key : {"allowInsecure", "insecure"}) {
    const auto* v = param(key);
    if (!v) continue;
    bool value = false;
    if (*v == "1" || iequals(*v, "true")) {
      value = true;
    } else if (*v == "0" || iequals(*v, "false")) {
      value = false;
    } else {
      return fail(reason, std::string(key) + "=" + *v + " is not a boolean (want 1, true, 0 or false)");
    }
    if (key == "insecure" && param("allowInsecure") && value != link.allow_insecure)
      return fail(reason, "allowInsecure and insecure disagree");
    link.allow_insecure = value;
  }

  if (has_fragment) {
    const auto name = percent_decode(fragment);
    if (!name) return fail(reason, "bad percent-encoding in the name after #");
    link.name = *name;
  }

  reason.clear();
  return link;
}

std::string format_share_link(const share_link& link) {
  std::string out = "vless://" + vless::format_uuid(link.uuid) + "@" + format_host_port(link.host, link.port);
  out += "?encryption=none&security=" + percent_encode(link.security);
  if (!link.sni.empty()) out += "&sni=" + percent_encode(link.sni);
  out += link.allow_insecure ? "&allowInsecure=1" : "&allowInsecure=0";
  out += "&type=" + percent_encode(link.type);
  if (link.type == "grpc") {
    out += "&serviceName=" + percent_encode(link.service_name);
    if (link.grpc_multi) out += "&mode=multi";
  } else if (link.type != "tcp") {
    out += "&path=" + percent_encode(link.path.empty() ? std::string("/") : link.path);
    if (!link.http_host.empty()) out += "&host=" + percent_encode(link.http_host);
    if (link.early_data > 0) out += "&ed=" + std::to_string(link.early_data);
  }
  if (!link.flow.empty()) out += "&flow=" + percent_encode(link.flow);
  if (!link.name.empty()) out += "#" + percent_encode(link.name);
  return out;
}

}  // namespace vlessbench
