#include "server/links.hpp"

#include <memory>
#include <stdexcept>

#include <qrencode.h>

#include "core/wire/client_entries.hpp"
#include "core/wire/share_link.hpp"
#include "core/wire/vision.hpp"
#include "core/net/tls.hpp"

namespace vlessbench {

share_link listener_link(const vless_listener_config& l, const user_config& u, const std::string& host,
                         const std::string& sni, bool insecure) {
  share_link link;
  link.uuid = u.uuid;
  link.host = host;
  link.port = l.listen.port();
  link.transport = l.transport;
  if (l.transport.tls) {
    link.sni = sni;
    link.allow_insecure = insecure;
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
    if (l.listen.port() == 0)
      throw std::runtime_error("listener \"" + l.name + "\" listens on " + format_endpoint(l.listen) +
                               ": the daemon picks the port when it starts; pass --ports-file with the file the "
                               "running vlessbenchd writes (vlessbenchd --ports-file FILE)");
    std::string host = opts.host;
    if (host.empty()) {
      if (l.listen.address().is_unspecified())
        throw std::runtime_error("listener \"" + l.name + "\" listens on " + format_endpoint(l.listen) +
                                 ": pass --host with the address clients use to reach this machine");
      host = l.listen.address().to_string();
    }
    const transport_spec& t = l.transport;
    // Raw TLS also serves XTLS Vision: its entries follow the plain one's, as NAME-vision.
    const bool vision = t.kind == transport_kind::tls && t.tls;
    for (const auto& u : cfg.users) {
      for (const bool with_flow : {false, true}) {
        if (with_flow && !vision) continue;
        share_link link = listener_link(l, u, host, opts.sni, insecure);
        if (with_flow) {
          link.flow = std::string(vision::flow_name);
          link.name += "-vision";
        }
        const std::string uri = format_share_link(link);

        out << "## " << link.name << " (listener " << l.name << ", user " << u.name << ", transport "
            << to_string(t.kind) << (!t.tls ? " over plain TCP" : "")
            << (with_flow ? ", flow xtls-rprx-vision" : "") << ", tcp quickack=" << to_string(l.tcp.quickack)
            << ")\n\n";
        out << "Share link (Shadowrocket, v2rayN, NekoBox):\n" << uri << "\n\n";
        if (opts.qr) out << terminal_qr(uri) << "\n";

        client_entry_options entry;
        entry.fingerprint = fingerprint;
        if (fingerprint.empty() && !cfg.tls.cert.empty())
          entry.fingerprint_note = "none yet: " + cfg.tls.cert +
                                   " is made at the daemon's first start; run links again after it for the pin";
        out << "Clash / mihomo (proxies:):\n" << mihomo_proxy(link, entry) << "\n";
        out << "sing-box (outbounds):\n" << singbox_outbound(link, entry) << "\n\n";
        // v2ray (v2fly) has no Vision: the entry is Xray's alone.
        out << (with_flow ? "Xray (outbounds):\n" : "v2ray / Xray (outbounds):\n") << v2ray_outbound(link, entry) << "\n\n";
      }
    }
  }
}

}  // namespace vlessbench
