#include "server/links.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <qrencode.h>

#include "core/wire/client_entries.hpp"
#include "core/wire/host_check.hpp"
#include "core/wire/net_address.hpp"
#include "core/wire/share_link.hpp"
#include "core/wire/vision.hpp"
#include "core/net/reality_auth.hpp"
#include "core/net/tls.hpp"
#include "server/transport/xhttp_alpn.hpp"

namespace vlessbench {

share_link listener_link(const vless_listener_config& l, const user_config& u, const std::string& host,
                         const std::string& sni, bool insecure) {
  share_link link;
  link.uuid = u.uuid;
  link.host = host;
  link.port = l.listen.port();
  link.transport = l.transport;
  // Over TLS an XHTTP client asks for what the listener serves first (server/transport/xhttp_alpn.hpp).
  if (l.transport.kind == transport_kind::xhttp && l.transport.tls) link.transport.alpn = xhttp::served_alpn.front();
  if (l.reality) {
    // The client's SNI must be one of server_names; its proof uses the first short id.
    link.sni = l.reality->server_names.front();
    link.reality = reality_params{reality::encode_key(reality::public_key(l.reality->private_key)),
                                  l.reality->short_ids_text.front(), "chrome"};
  } else if (l.transport.tls) {
    link.sni = sni;
    link.allow_insecure = insecure;
  }
  link.name = l.name + "-" + u.name;
  return link;
}

target::qr_matrix qr_modules(const std::string& text) {
  std::unique_ptr<QRcode, void (*)(QRcode*)> qr(QRcode_encodeString(text.c_str(), 0, QR_ECLEVEL_L, QR_MODE_8, 1),
                                                QRcode_free);
  if (!qr) throw std::runtime_error("QR encoding failed for a " + std::to_string(text.size()) + "-byte link");
  target::qr_matrix m;
  m.width = qr->width;
  m.dark.resize(static_cast<std::size_t>(m.width) * static_cast<std::size_t>(m.width));
  for (std::size_t i = 0; i < m.dark.size(); ++i) m.dark[i] = (qr->data[i] & 1) != 0;
  return m;
}

std::string terminal_qr(const std::string& text) {
  const target::qr_matrix m = qr_modules(text);
  const int w = m.width;
  const int quiet = 2;
  // Light modules are drawn (as full blocks), so the code reads on a dark terminal; each text row
  // holds two module rows using the half-block characters.
  std::string out;
  for (int y = -quiet; y < w + quiet; y += 2) {
    for (int x = -quiet; x < w + quiet; ++x) {
      const bool top = !m.at(x, y), bottom = !m.at(x, y + 1);
      out += top && bottom ? "\u2588" : top ? "\u2580" : bottom ? "\u2584" : " ";
    }
    out += '\n';
  }
  return out;
}

std::string transport_words(const transport_spec& t) {
  const bool wrapped = t.kind == transport_kind::ws || t.kind == transport_kind::httpupgrade ||
                       t.kind == transport_kind::grpc || t.kind == transport_kind::xhttp;
  return std::string(to_string(t.kind)) + (wrapped && !t.tls ? " over plain TCP" : "");
}

std::string transport_words(const vless_listener_config& l) {
  return transport_words(l.transport) + (l.reality ? " with REALITY" : "");
}

std::vector<user_link> listener_links(const vless_listener_config& l, const config& cfg, const std::string& host,
                                      const std::string& sni) {
  // A self-signed certificate (in memory or generated) cannot be verified by name: clients skip
  // verification, and mihomo can pin the certificate's fingerprint instead.
  const bool insecure = cfg.tls.cert.empty() || cfg.tls.generate;
  // Raw TLS also serves XTLS Vision: its entries follow the plain one's, as NAME-vision.
  const bool vision = l.transport.kind == transport_kind::tls && l.transport.tls;
  std::vector<user_link> out;
  for (const auto& u : cfg.users) {
    for (const bool with_flow : {false, true}) {
      if (with_flow && !vision) continue;
      share_link link = listener_link(l, u, host, sni, insecure);
      if (with_flow) {
        link.flow = std::string(vision::flow_name);
        link.name += "-vision";
      }
      out.push_back({&u, std::move(link)});
    }
  }
  return out;
}

target::index_content index_content_of(const config& cfg, std::string_view listener, std::string_view host) {
  target::index_content c;
  const auto t = std::find_if(cfg.target.begin(), cfg.target.end(),
                              [&](const target_listener_config& x) { return x.name == listener && !x.banner; });
  if (t == cfg.target.end() || !t->index_links) return c;
  c.links = true;
  c.host = t->index_host.empty() ? std::string(host) : t->index_host;
  if (cfg.vless.empty())
    c.problem = "this daemon has no [[vless]] listener";
  else if (cfg.users.empty())
    c.problem = "this daemon has no [[users]]";
  for (const auto& l : cfg.vless) {
    if (l.listen.port() == 0) continue;  // not bound (a config not yet running): no port to dial
    for (const auto& [user, link] : listener_links(l, cfg, c.host, links_options{}.sni)) {
      if (c.nodes.size() == max_index_nodes) {
        ++c.left_out;
        continue;
      }
      target::index_node n;
      n.name = link.name;
      n.listener = l.name;
      n.user = user->name;
      n.transport = transport_words(l);
      n.quickack = std::string(to_string(l.tcp.quickack));
      n.vision = !link.flow.empty();
      n.link = format_share_link(link);
      n.qr = qr_modules(n.link);
      c.nodes.push_back(std::move(n));
    }
  }
  return c;
}

namespace {

// The host an index page's links dial when the target names none (index_host): the one the browser
// used (Host without its port), else the address the request arrived on.
std::string index_link_host(std::optional<std::string_view> host_value, const asio::ip::address& local) {
  if (host_value) {
    std::string reason;
    if (auto h = parse_host_header(*host_value, reason)) return std::move(h->host);
  }
  return unmapped(local).to_string();
}

}  // namespace

index_cache::result index_cache::get(const std::shared_ptr<const config>& cfg, std::string_view listener,
                                     std::optional<std::string_view> host_value, const asio::ip::address& local) {
  if (cfg != cfg_) {  // a reload: every page is made again, under the new users and listeners
    cfg_ = cfg;
    pages_.clear();
  }
  const auto t = std::find_if(cfg->target.begin(), cfg->target.end(),
                              [&](const target_listener_config& x) { return x.name == listener && !x.banner; });
  const bool links = t != cfg->target.end() && t->index_links;
  std::string host;  // the page's key: what its links dial (nothing without links)
  if (links) {
    std::vector<std::string> names = cfg->admin.hosts;
    if (!t->index_host.empty()) names.push_back(t->index_host);
    if (host_value && !host_names_listener(*host_value, local, names)) return {{true, nullptr}, outcome::misdirected};
    host = t->index_host.empty() ? index_link_host(host_value, local) : t->index_host;
  }
  for (const auto& e : pages_)
    if (e.listener == listener && e.host == host) return {{false, e.page}, outcome::cached};
  auto page = std::make_shared<const std::string>(target::index_page(index_content_of(*cfg, listener, host)));
  if (pages_.size() == max_pages) pages_.erase(pages_.begin());
  pages_.push_back(entry{std::string(listener), host, page});
  return {{false, std::move(page)}, outcome::rendered};
}

std::string_view to_string(index_cache::outcome o) {
  switch (o) {
    case index_cache::outcome::rendered: return "rendered";
    case index_cache::outcome::cached: return "cached";
    case index_cache::outcome::misdirected: break;
  }
  return "misdirected";
}

void print_links(std::ostream& out, const config& cfg, const links_options& opts) {
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
    for (const auto& [user, link] : listener_links(l, cfg, host, opts.sni)) {
      const bool with_flow = !link.flow.empty();
      const std::string uri = format_share_link(link);

      out << "## " << link.name << " (listener " << l.name << ", user " << user->name << ", transport "
          << transport_words(l) << (with_flow ? ", flow xtls-rprx-vision" : "")
          << ", tcp quickack=" << to_string(l.tcp.quickack) << ")\n\n";
      out << "Share link (Shadowrocket, v2rayN, NekoBox):\n" << uri << "\n\n";
      if (opts.qr) out << terminal_qr(uri) << "\n";

      client_entry_options entry;
      entry.fingerprint = fingerprint;
      if (fingerprint.empty() && !cfg.tls.cert.empty())
        entry.fingerprint_note =
            "none yet: " + cfg.tls.cert + " is made at the daemon's first start; run links again after it for the pin";
      out << "Clash / mihomo (proxies:):\n" << mihomo_proxy(link, entry) << "\n";
      // sing-box has no XHTTP; v2ray (v2fly) has no XHTTP, Vision or REALITY: those entries are Xray's alone.
      const bool xhttp = l.transport.kind == transport_kind::xhttp;
      const bool xray_only = with_flow || xhttp || l.reality.has_value();
      if (!xhttp)
        out << "sing-box (outbounds):\n" << singbox_outbound(link, entry) << "\n\n";
      else
        out << "sing-box: no XHTTP transport (use Xray or mihomo)\n\n";
      out << (xray_only ? "Xray (outbounds):\n" : "v2ray / Xray (outbounds):\n") << v2ray_outbound(link, entry)
          << "\n\n";
    }
  }
}

}  // namespace vlessbench
