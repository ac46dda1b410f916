#include "server/links.hpp"

#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <qrencode.h>

#include "core/share_link.hpp"
#include "core/tls.hpp"

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

}  // namespace

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
    for (const auto& u : cfg.users) {
      const std::string name = l.name + "-" + u.name;
      share_link link;
      link.uuid = u.uuid;
      link.host = host;
      link.port = static_cast<std::uint16_t>(port);
      link.sni = opts.sni;
      link.allow_insecure = insecure;
      link.name = name;
      const std::string uri = format_share_link(link);

      out << "## " << name << " (listener " << l.name << ", user " << u.name << ", tcp quickack="
          << to_string(l.tcp.quickack) << ")\n\n";
      out << "Share link (Shadowrocket, v2rayN, NekoBox):\n" << uri << "\n\n";
      if (opts.qr) out << terminal_qr(uri) << "\n";

      out << "Clash / mihomo (proxies:):\n"
          << "  - name: " << yaml_quote(name) << "\n"
          << "    type: vless\n"
          << "    server: " << yaml_quote(host) << "\n"
          << "    port: " << port << "\n"
          << "    uuid: " << u.uuid_text << "\n"
          << "    network: tcp\n"
          << "    udp: false\n"
          << "    tls: true\n"
          << "    servername: " << yaml_quote(opts.sni) << "\n"
          << "    skip-cert-verify: " << (insecure ? "true" : "false") << "\n";
      if (!fingerprint.empty()) out << "    fingerprint: " << fingerprint << "\n";
      out << "\n";

      nlohmann::ordered_json sing{{"type", "vless"},       {"tag", name},
                                  {"server", host},        {"server_port", port},
                                  {"uuid", u.uuid_text},   {"network", "tcp"},
                                  {"tls", {{"enabled", true}, {"server_name", opts.sni}, {"insecure", insecure}}}};
      out << "sing-box (outbounds):\n" << sing.dump(2) << "\n\n";

      nlohmann::ordered_json v2{
          {"protocol", "vless"},
          {"tag", name},
          {"settings",
           {{"vnext", {{{"address", host}, {"port", port},
                        {"users", {{{"id", u.uuid_text}, {"encryption", "none"}, {"level", 0}}}}}}}}},
          {"streamSettings",
           {{"network", "tcp"},
            {"security", "tls"},
            {"tlsSettings", {{"serverName", opts.sni}, {"allowInsecure", insecure}}}}}};
      out << "v2ray / Xray (outbounds):\n" << v2.dump(2) << "\n\n";
    }
  }
}

}  // namespace vlessbench
