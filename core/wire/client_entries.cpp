#include "core/wire/client_entries.hpp"

#include <nlohmann/json.hpp>

#include "core/wire/uuid.hpp"

namespace vlessbench {
namespace {

std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string path_of(const transport_spec& t) { return t.path.empty() ? "/" : t.path; }
// The header ws early data rides in, spelled out for the clients that need it named.
std::string early_data_header(const transport_spec& t) {
  return t.early_data_header.empty() ? "Sec-WebSocket-Protocol" : t.early_data_header;
}

}  // namespace

std::string mihomo_proxy(const share_link& l, const client_entry_options& opts) {
  const transport_spec& t = l.transport;
  const bool tls = t.tls;
  const bool grpc = t.kind == transport_kind::grpc;
  // mihomo has no httpupgrade network: it is ws with v2ray-http-upgrade.
  std::string out = "  - name: " + yaml_quote(l.name) + "\n" +
                    "    type: vless\n"
                    "    server: " +
                    yaml_quote(l.host) + "\n" + "    port: " + std::to_string(l.port) + "\n" +
                    "    uuid: " + vless::format_uuid(l.uuid) + "\n" + "    network: " +
                    (t.upgrades()                      ? "ws"
                     : grpc                            ? "grpc"
                     : t.kind == transport_kind::xhttp ? "xhttp"
                                                       : "tcp") +
                    "\n" +
                    "    udp: true\n"
                    "    tls: " +
                    (tls ? "true" : "false") + "\n";
  if (!l.flow.empty()) out += "    flow: " + l.flow + "\n";
  if (l.reality) {
    out += "    servername: " + yaml_quote(l.sni) + "\n";
    out += "    client-fingerprint: " + l.reality->fingerprint + "\n";
    out += "    reality-opts:\n      public-key: " + l.reality->public_key +
           "\n      short-id: " + yaml_quote(l.reality->short_id) + "\n";
  } else if (tls) {
    out += "    servername: " + yaml_quote(l.sni) + "\n";
    out += std::string("    skip-cert-verify: ") + (l.allow_insecure ? "true" : "false") + "\n";
    if (!opts.fingerprint.empty())
      out += "    fingerprint: " + opts.fingerprint + "\n";
    else if (!opts.fingerprint_note.empty())
      out += "    # fingerprint: " + opts.fingerprint_note + "\n";
  }
  if (grpc) out += "    grpc-opts:\n      grpc-service-name: " + yaml_quote(t.service_name) + "\n";
  if (t.kind == transport_kind::xhttp) {
    if (tls && !t.alpn.empty()) out += "    alpn:\n      - " + yaml_quote(t.alpn) + "\n";
    out += "    xhttp-opts:\n      path: " + yaml_quote(path_of(t)) + "\n";
    if (!t.host.empty()) out += "      host: " + yaml_quote(t.host) + "\n";
    out += "      mode: " + std::string(xhttp::to_string(t.xhttp_mode)) + "\n";
  }
  if (t.upgrades()) {
    out += "    ws-opts:\n      path: " + yaml_quote(path_of(t)) + "\n";
    if (!t.host.empty()) out += "      headers:\n        Host: " + yaml_quote(t.host) + "\n";
    if (t.kind == transport_kind::httpupgrade) {
      out += "      v2ray-http-upgrade: true\n      v2ray-http-upgrade-fast-open: true\n";
    } else if (t.max_early_data > 0) {
      out += "      max-early-data: " + std::to_string(t.max_early_data) + "\n";
      out += "      early-data-header-name: " + yaml_quote(early_data_header(t)) + "\n";
    }
  }
  return out;
}

std::string singbox_outbound(const share_link& l, const client_entry_options&) {
  const transport_spec& t = l.transport;
  // No "network": sing-box reads "tcp" there as TCP only ("UDP is not supported by outbound").
  nlohmann::ordered_json sing{{"type", "vless"},
                              {"tag", l.name},
                              {"server", l.host},
                              {"server_port", l.port},
                              {"uuid", vless::format_uuid(l.uuid)}};
  if (!l.flow.empty()) sing["flow"] = l.flow;
  if (l.reality)
    sing["tls"] = {
        {"enabled", true},
        {"server_name", l.sni},
        {"utls", {{"enabled", true}, {"fingerprint", l.reality->fingerprint}}},
        {"reality", {{"enabled", true}, {"public_key", l.reality->public_key}, {"short_id", l.reality->short_id}}}};
  else if (t.tls)
    sing["tls"] = {{"enabled", true}, {"server_name", l.sni}, {"insecure", l.allow_insecure}};
  if (t.kind == transport_kind::ws) {
    nlohmann::ordered_json tr{{"type", "ws"}, {"path", path_of(t)}};
    if (!t.host.empty()) tr["headers"] = {{"Host", t.host}};
    if (t.max_early_data > 0) {
      tr["max_early_data"] = t.max_early_data;
      tr["early_data_header_name"] = early_data_header(t);
    }
    sing["transport"] = tr;
  } else if (t.kind == transport_kind::httpupgrade) {
    nlohmann::ordered_json tr{{"type", "httpupgrade"}, {"path", path_of(t)}};
    if (!t.host.empty()) tr["host"] = t.host;
    sing["transport"] = tr;
  } else if (t.kind == transport_kind::grpc) {
    sing["transport"] = {{"type", "grpc"}, {"service_name", t.service_name}};
  }
  return sing.dump(2);
}

std::string v2ray_outbound(const share_link& l, const client_entry_options&) {
  const transport_spec& t = l.transport;
  const bool tls = t.tls;
  // v2fly reads maxEarlyData + earlyDataHeaderName (4.39+), Xray the path's ?ed=; both are set.
  nlohmann::ordered_json stream{{"network", std::string(link_type(t.kind))},
                                {"security", l.reality ? "reality"
                                             : tls     ? "tls"
                                                       : "none"}};
  if (l.reality)
    stream["realitySettings"] = {{"serverName", l.sni},
                                 {"fingerprint", l.reality->fingerprint},
                                 {"publicKey", l.reality->public_key},
                                 {"shortId", l.reality->short_id}};
  else if (tls)
    stream["tlsSettings"] = {{"serverName", l.sni}, {"allowInsecure", l.allow_insecure}};
  if (tls && !l.reality && !t.alpn.empty()) stream["tlsSettings"]["alpn"] = {t.alpn};
  if (t.kind == transport_kind::ws) {
    const bool ed = t.max_early_data > 0;
    nlohmann::ordered_json ws{{"path", ed ? path_of(t) + "?ed=" + std::to_string(t.max_early_data) : path_of(t)}};
    if (!t.host.empty()) ws["headers"] = {{"Host", t.host}};
    if (ed) {
      ws["maxEarlyData"] = t.max_early_data;
      ws["earlyDataHeaderName"] = early_data_header(t);
    }
    stream["wsSettings"] = ws;
  } else if (t.kind == transport_kind::httpupgrade) {
    nlohmann::ordered_json hu{{"path", path_of(t)}};
    if (!t.host.empty()) hu["host"] = t.host;
    stream["httpupgradeSettings"] = hu;
  } else if (t.kind == transport_kind::grpc) {
    nlohmann::ordered_json g{{"serviceName", t.service_name}};
    if (t.grpc_multi) g["multiMode"] = true;
    stream["grpcSettings"] = g;
  } else if (t.kind == transport_kind::xhttp) {
    nlohmann::ordered_json x{{"path", path_of(t)}, {"mode", std::string(xhttp::to_string(t.xhttp_mode))}};
    if (!t.host.empty()) x["host"] = t.host;
    stream["xhttpSettings"] = x;
  }
  nlohmann::ordered_json user{{"id", vless::format_uuid(l.uuid)}, {"encryption", "none"}, {"level", 0}};
  if (!l.flow.empty()) user["flow"] = l.flow;
  nlohmann::ordered_json v2{{"protocol", "vless"},
                            {"tag", l.name},
                            {"settings", {{"vnext", {{{"address", l.host}, {"port", l.port}, {"users", {user}}}}}}},
                            {"streamSettings", stream}};
  return v2.dump(2);
}

}  // namespace vlessbench
