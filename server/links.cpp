#include "server/links.hpp"

#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <qrencode.h>

#include "core/wire/share_link.hpp"
#include "core/net/tls.hpp"

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

const char* network_name(transport_kind k) {
  switch (k) {
    case transport_kind::ws: return "ws";
    case transport_kind::httpupgrade: return "httpupgrade";
    case transport_kind::grpc: return "grpc";
    case transport_kind::tls: break;
  }
  return "tcp";
}

// The header early data rides in, spelled out for the clients that need it named.
std::string early_data_header(const transport_config& t) {
  return t.early_data_header.empty() ? "Sec-WebSocket-Protocol" : t.early_data_header;
}

}  // namespace

share_link listener_link(const vless_listener_config& l, const user_config& u, const std::string& host,
                         const std::string& sni, bool insecure) {
  share_link link;
  link.uuid = u.uuid;
  link.host = host;
  link.port = l.listen.port();
  link.security = l.transport.tls ? "tls" : "none";
  if (l.transport.tls) {
    link.sni = sni;
    link.allow_insecure = insecure;
  }
  link.type = network_name(l.transport.kind);
  if (l.transport.kind == transport_kind::grpc) {
    link.service_name = l.transport.service_name;
  } else if (l.transport.kind != transport_kind::tls) {
    link.path = l.transport.path;
    link.http_host = l.transport.host;
    link.early_data = l.transport.max_early_data;
  }
  link.name = l.name + "-" + u.name;
  return link;
}

std::string terminal_qr(const std::string& text) {
  std::unique_ptr<QRcode, void (*)(QRcode*)> qr(
      QRcode_encodeString(text.c_str(), 0, QR_ECLEVEL_L, QR_MODE_8, 1), QRcode_free);
  if (!qr) throw std::runtime_error("QR encoding failed for a " + std::to_string(text.size()) + "-byte link");
  const int w = qr->width;
  const int quiet = 2;
  auto dark = [&](int x, int y) {
    if (x < 0 || y < 0 || x >= w || y >= w) return false;
    return (qr->data[y * w + x] & 1) != 0;
  };
  // Light modules are drawn (as full blocks), so the code reads on a dark terminal; each text row
  // holds two module rows using the half-block characters.
  std::string out;
  for (int y = -quiet; y < w + quiet; y += 2) {
    for (int x = -quiet; x < w + quiet; ++x) {
      const bool top = !dark(x, y), bottom = !dark(x, y + 1);
      out += top && bottom ? "\u2588" : top ? "\u2580" : bottom ? "\u2584" : " ";
    }
    out += '\n';
  }
  return out;
}

void print_links(std::ostream& out, const config& cfg, const links_options& opts) {
  // A self-signed certificate (in memory or generated) cannot be verified by name: clients skip
  // verification, and mihomo can pin the certificate's fingerprint instead.
  const bool insecure = cfg.tls.cert.empty() || cfg.tls.generate;
  std::string fingerprint;
  if (!cfg.tls.cert.empty()) {
    try {
      fingerprint = tls::certificate_sha256(cfg.tls.cert);
    } catch (const std::exception&) {
      // Not generated yet (first start pending): no pin to offer.
    }
  }
  for (const auto& l : cfg.vless) {
    std::string host = opts.host;
    if (host.empty()) {
      if (l.listen.address().is_unspecified())
        throw std::runtime_error("listener \"" + l.name + "\" listens on " + format_endpoint(l.listen) +
                                 ": pass --host with the address clients use to reach this machine");
      host = l.listen.address().to_string();
    }
    const unsigned port = l.listen.port();
    const transport_config& t = l.transport;
    const bool tls = t.tls;
    const bool upgrade = t.kind == transport_kind::ws || t.kind == transport_kind::httpupgrade;
    const bool grpc = t.kind == transport_kind::grpc;
    // The Host the upgrade request carries: the configured one, else what clients dial.
    const std::string http_host = t.host;
    for (const auto& u : cfg.users) {
      const share_link link = listener_link(l, u, host, opts.sni, insecure);
      const std::string& name = link.name;
      const std::string uri = format_share_link(link);

      out << "## " << name << " (listener " << l.name << ", user " << u.name << ", transport "
          << to_string(t.kind) << ((upgrade || grpc) && !tls ? " over plain TCP" : "") << ", tcp quickack="
          << to_string(l.tcp.quickack) << ")\n\n";
      out << "Share link (Shadowrocket, v2rayN, NekoBox):\n" << uri << "\n\n";
      if (opts.qr) out << terminal_qr(uri) << "\n";

      // mihomo has no httpupgrade network: it is ws with v2ray-http-upgrade.
      out << "Clash / mihomo (proxies:):\n"
          << "  - name: " << yaml_quote(name) << "\n"
          << "    type: vless\n"
          << "    server: " << yaml_quote(host) << "\n"
          << "    port: " << port << "\n"
          << "    uuid: " << u.uuid_text << "\n"
          << "    network: " << (upgrade ? "ws" : grpc ? "grpc" : "tcp") << "\n"
          << "    udp: true\n"
          << "    tls: " << (tls ? "true" : "false") << "\n";
      if (tls) {
        out << "    servername: " << yaml_quote(opts.sni) << "\n"
            << "    skip-cert-verify: " << (insecure ? "true" : "false") << "\n";
        if (!fingerprint.empty())
          out << "    fingerprint: " << fingerprint << "\n";
        else if (!cfg.tls.cert.empty())
          out << "    # fingerprint: none yet: " << cfg.tls.cert
              << " is made at the daemon's first start; run links again after it for the pin\n";
      }
      if (grpc) {
        out << "    grpc-opts:\n"
            << "      grpc-service-name: " << yaml_quote(t.service_name) << "\n";
      }
      if (upgrade) {
        out << "    ws-opts:\n"
            << "      path: " << yaml_quote(t.path) << "\n";
        if (!http_host.empty()) out << "      headers:\n        Host: " << yaml_quote(http_host) << "\n";
        if (t.kind == transport_kind::httpupgrade) {
          out << "      v2ray-http-upgrade: true\n"
              << "      v2ray-http-upgrade-fast-open: true\n";
        } else if (t.max_early_data > 0) {
          out << "      max-early-data: " << t.max_early_data << "\n"
              << "      early-data-header-name: " << yaml_quote(early_data_header(t)) << "\n";
        }
      }
      out << "\n";

      nlohmann::ordered_json sing{{"type", "vless"},     {"tag", name},         {"server", host},
                                  {"server_port", port}, {"uuid", u.uuid_text}};
      if (tls) sing["tls"] = {{"enabled", true}, {"server_name", opts.sni}, {"insecure", insecure}};
      if (t.kind == transport_kind::ws) {
        nlohmann::ordered_json tr{{"type", "ws"}, {"path", t.path}};
        if (!http_host.empty()) tr["headers"] = {{"Host", http_host}};
        if (t.max_early_data > 0) {
          tr["max_early_data"] = t.max_early_data;
          tr["early_data_header_name"] = early_data_header(t);
        }
        sing["transport"] = tr;
      } else if (t.kind == transport_kind::httpupgrade) {
        nlohmann::ordered_json tr{{"type", "httpupgrade"}, {"path", t.path}};
        if (!http_host.empty()) tr["host"] = http_host;
        sing["transport"] = tr;
      } else if (grpc) {
        sing["transport"] = {{"type", "grpc"}, {"service_name", t.service_name}};
      }
      out << "sing-box (outbounds):\n" << sing.dump(2) << "\n\n";

      // v2fly reads maxEarlyData + earlyDataHeaderName (4.39+), Xray the path's ?ed=; both are set.
      nlohmann::ordered_json stream{{"network", network_name(t.kind)}, {"security", tls ? "tls" : "none"}};
      if (tls) stream["tlsSettings"] = {{"serverName", opts.sni}, {"allowInsecure", insecure}};
      if (t.kind == transport_kind::ws) {
        const bool ed = t.max_early_data > 0;
        nlohmann::ordered_json ws{{"path", ed ? t.path + "?ed=" + std::to_string(t.max_early_data) : t.path}};
        if (!http_host.empty()) ws["headers"] = {{"Host", http_host}};
        if (ed) {
          ws["maxEarlyData"] = t.max_early_data;
          ws["earlyDataHeaderName"] = early_data_header(t);
        }
        stream["wsSettings"] = ws;
      } else if (t.kind == transport_kind::httpupgrade) {
        nlohmann::ordered_json hu{{"path", t.path}};
        if (!http_host.empty()) hu["host"] = http_host;
        stream["httpupgradeSettings"] = hu;
      } else if (grpc) {
        stream["grpcSettings"] = {{"serviceName", t.service_name}};
      }
      nlohmann::ordered_json v2{
          {"protocol", "vless"},
          {"tag", name},
          {"settings",
           {{"vnext", {{{"address", host}, {"port", port},
                        {"users", {{{"id", u.uuid_text}, {"encryption", "none"}, {"level", 0}}}}}}}}},
          {"streamSettings", stream}};
      out << "v2ray / Xray (outbounds):\n" << v2.dump(2) << "\n\n";
    }
  }
}

}  // namespace vlessbench
