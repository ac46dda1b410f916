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

bool is_upgrade(const share_link& l) { return l.type == "ws" || l.type == "httpupgrade"; }
std::string path_of(const share_link& l) { return l.path.empty() ? "/" : l.path; }

}  // namespace

std::string mihomo_proxy(const share_link& l, const client_entry_options& opts) {
  const bool tls = l.security == "tls";
  const bool grpc = l.type == "grpc";
  // mihomo has no httpupgrade network: it is ws with v2ray-http-upgrade.
  std::string out = "  - name: " + yaml_quote(l.name) + "\n" +
                    "    type: vless\n"
                    "    server: " + yaml_quote(l.host) + "\n" +
                    "    port: " + std::to_string(l.port) + "\n" +
                    "    uuid: " + vless::format_uuid(l.uuid) + "\n" +
                    "    network: " + (is_upgrade(l) ? "ws" : grpc ? "grpc" : "tcp") + "\n" +
                    "    udp: true\n"
                    "    tls: " + (tls ? "true" : "false") + "\n";
  if (!l.flow.empty()) out += "    flow: " + l.flow + "\n";
  if (tls) {
    out += "    servername: " + yaml_quote(l.sni) + "\n";
    out += std::string("    skip-cert-verify: ") + (l.allow_insecure ? "true" : "false") + "\n";
    if (!opts.fingerprint.empty())
      out += "    fingerprint: " + opts.fingerprint + "\n";
    else if (!opts.fingerprint_note.empty())
      out += "    # fingerprint: " + opts.fingerprint_note + "\n";
  }
  if (grpc) out += "    grpc-opts:\n      grpc-service-name: " + yaml_quote(l.service_name) + "\n";
  if (is_upgrade(l)) {
    out += "    ws-opts:\n      path: " + yaml_quote(path_of(l)) + "\n";
    if (!l.http_host.empty()) out += "      headers:\n        Host: " + yaml_quote(l.http_host) + "\n";
    if (l.type == "httpupgrade") {
      out += "      v2ray-http-upgrade: true\n      v2ray-http-upgrade-fast-open: true\n";
    } else if (l.early_data > 0) {
      out += "      max-early-data: " + std::to_string(l.early_data) + "\n";
      out += "      early-data-header-name: " + yaml_quote(opts.early_data_header) + "\n";
    }
  }
  return out;
}

std::string singbox_outbound(const share_link& l, const client_entry_options& opts) {
  // No "network": sing-box reads "tcp" there as TCP only ("UDP is not supported by outbound").
  nlohmann::ordered_json sing{{"type", "vless"},      {"tag", l.name},
                              {"server", l.host},     {"server_port", l.port},
                              {"uuid", vless::format_uuid(l.uuid)}};
  if (!l.flow.empty()) sing["flow"] = l.flow;
  if (l.security == "tls") sing["tls"] = {{"enabled", true}, {"server_name", l.sni}, {"insecure", l.allow_insecure}};
  if (l.type == "ws") {
    nlohmann::ordered_json tr{{"type", "ws"}, {"path", path_of(l)}};
    if (!l.http_host.empty()) tr["headers"] = {{"Host", l.http_host}};
    if (l.early_data > 0) {
      tr["max_early_data"] = l.early_data;
      tr["early_data_header_name"] = opts.early_data_header;
    }
    sing["transport"] = tr;
  } else if (l.type == "httpupgrade") {
    nlohmann::ordered_json tr{{"type", "httpupgrade"}, {"path", path_of(l)}};
    if (!l.http_host.empty()) tr["host"] = l.http_host;
    sing["transport"] = tr;
  } else if (l.type == "grpc") {
    sing["transport"] = {{"type", "grpc"}, {"service_name", l.service_name}};
  }
  return sing.dump(2);
}

std::string v2ray_outbound(const share_link& l, const client_entry_options& opts) {
  const bool tls = l.security == "tls";
  // v2fly reads maxEarlyData + earlyDataHeaderName (4.39+), Xray the path's ?ed=; both are set.
  nlohmann::ordered_json stream{{"network", l.type}, {"security", tls ? "tls" : "none"}};
  if (tls) stream["tlsSettings"] = {{"serverName", l.sni}, {"allowInsecure", l.allow_insecure}};
  if (l.type == "ws") {
    const bool ed = l.early_data > 0;
    nlohmann::ordered_json ws{{"path", ed ? path_of(l) + "?ed=" + std::to_string(l.early_data) : path_of(l)}};
    if (!l.http_host.empty()) ws["headers"] = {{"Host", l.http_host}};
    if (ed) {
      ws["maxEarlyData"] = l.early_data;
      ws["earlyDataHeaderName"] = opts.early_data_header;
    }
    stream["wsSettings"] = ws;
  } else if (l.type == "httpupgrade") {
    nlohmann::ordered_json hu{{"path", path_of(l)}};
    if (!l.http_host.empty()) hu["host"] = l.http_host;
    stream["httpupgradeSettings"] = hu;
  } else if (l.type == "grpc") {
    nlohmann::ordered_json g{{"serviceName", l.service_name}};
    if (l.grpc_multi) g["multiMode"] = true;
    stream["grpcSettings"] = g;
  }
  nlohmann::ordered_json user{{"id", vless::format_uuid(l.uuid)}, {"encryption", "none"}, {"level", 0}};
  if (!l.flow.empty()) user["flow"] = l.flow;
  nlohmann::ordered_json v2{
      {"protocol", "vless"},
      {"tag", l.name},
      {"settings", {{"vnext", {{{"address", l.host}, {"port", l.port}, {"users", {user}}}}}}},
      {"streamSettings", stream}};
  return v2.dump(2);
}

}  // namespace vlessbench
