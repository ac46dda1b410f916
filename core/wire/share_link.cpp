#include "core/wire/share_link.hpp"

#include "core/wire/net_address.hpp"
#include "core/wire/percent.hpp"
#include "core/wire/transport_spec.hpp"
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
std::string quote_host(std::string_view text) { return "'" + std::string(text.substr(0, 80)) + "'"; }

std::optional<share_link> fail(std::string& reason, std::string text) {
  reason = std::move(text);
  return std::nullopt;
}

// allowInsecure= and its newer spelling insecure=: booleans that must agree when both are given.
bool read_allow_insecure(const query_params& params, bool& allow_insecure, std::string& reason) {
  for (std::string_view key : {"allowInsecure", "insecure"}) {
    const auto it = params.find(key);
    if (it == params.end()) continue;
    const std::string* v = &it->second;
    bool value = false;
    if (*v == "1" || iequals(*v, "true")) {
      value = true;
    } else if (*v == "0" || iequals(*v, "false")) {
      value = false;
    } else {
      reason = std::string(key) + "=" + *v + " is not a boolean (want 1, true, 0 or false)";
      return false;
    }
    if (key == "insecure" && params.find("allowInsecure") != params.end() && value != allow_insecure) {
      reason = "allowInsecure and insecure disagree";
      return false;
    }
    allow_insecure = value;
  }
  return true;
}

// security=reality: pbk= (required), sid=, fp=. REALITY is a security layer in TLS's place, so
// the transport's rules are TLS's: params says security=tls afterwards.
bool read_reality(query_params& params, share_link& link, std::string& reason) {
  const auto security = params.find("security");
  if (security == params.end() || security->second != "reality") return true;
  reality_params r;
  if (const auto k = params.find("pbk"); k != params.end()) r.public_key = k->second;
  if (const auto s = params.find("sid"); s != params.end()) r.short_id = s->second;
  if (const auto f = params.find("fp"); f != params.end() && !f->second.empty()) r.fingerprint = f->second;
  if (r.public_key.empty()) {
    reason = "security=reality without pbk= (the server's public key)";
    return false;
  }
  link.reality = std::move(r);
  security->second = "tls";
  return true;
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

  query_params params;
  if (!parse_query(query, params, reason)) return std::nullopt;
  auto param = [&](std::string_view key) -> const std::string* {
    const auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second;
  };

  // Absent means "none" (proposal default); VLESS itself has no encryption.
  if (const auto* v = param("encryption"); v && *v != "none")
    return fail(reason, "encryption=" + *v + " is not supported: VLESS has no encryption, use encryption=none");

  if (!read_reality(params, link, reason)) return std::nullopt;
  auto transport = parse_transport_query(params, reason);
  if (!transport) return std::nullopt;
  link.transport = std::move(*transport);

  if (const auto* v = param("flow"); v && !v->empty()) {
    if (*v != vision::flow_name) return fail(reason, "flow=" + *v + " is not supported: only xtls-rprx-vision is");
    if (link.transport.kind != transport_kind::tls || !link.transport.tls)
      return fail(reason, "flow=xtls-rprx-vision runs on raw TLS only (type=tcp, security=tls)");
    link.flow = *v;
  }

  if (const auto* v = param("sni")) link.sni = *v;

  if (!read_allow_insecure(params, link.allow_insecure, reason)) return std::nullopt;

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
  // security= first, then the link's own sni= and allowInsecure=, then type= and the rest.
  const auto transport = transport_query(link.transport);
  if (link.reality) {
    out += "?encryption=none&security=reality";
    if (!link.sni.empty()) out += "&sni=" + percent_encode(link.sni);
    out += "&pbk=" + percent_encode(link.reality->public_key) + "&sid=" + percent_encode(link.reality->short_id) +
           "&fp=" + percent_encode(link.reality->fingerprint);
  } else {
    out += "?encryption=none&security=" + percent_encode(transport.front().second);
    if (!link.sni.empty()) out += "&sni=" + percent_encode(link.sni);
    out += link.allow_insecure ? "&allowInsecure=1" : "&allowInsecure=0";
  }
  for (std::size_t i = 1; i < transport.size(); ++i)
    out += "&" + std::string(transport[i].first) + "=" + percent_encode(transport[i].second);
  if (!link.flow.empty()) out += "&flow=" + percent_encode(link.flow);
  if (!link.name.empty()) out += "#" + percent_encode(link.name);
  return out;
}

}  // namespace vlessbench
