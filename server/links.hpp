#pragma once
// `vlessbenchd links`: what a user pastes into each client, for every user x VLESS listener.
#include <ostream>
#include <string>

#include "core/config/config.hpp"
#include "core/wire/share_link.hpp"

namespace vlessbench {

struct links_options {
  std::string host;        // address clients dial; empty: the listener's own (must not be 0.0.0.0)
  std::string sni = "localhost";
  bool qr = true;          // terminal QR code of each share link
};

// The share link of one listener for one user: its transport's type, path, host and early data.
share_link listener_link(const vless_listener_config& l, const user_config& u, const std::string& host,
                         const std::string& sni, bool insecure);

// Throws std::runtime_error when a listener has no usable address and no host was given.
void print_links(std::ostream& out, const config& cfg, const links_options& opts);

// The QR code of text as terminal lines (two modules per character, quiet zone included).
std::string terminal_qr(const std::string& text);

}  // namespace vlessbench
