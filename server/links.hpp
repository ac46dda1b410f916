#pragma once
// `vlessbenchd links`: what a user pastes into each client, for every user x VLESS listener.
#include <ostream>
#include <string>

#include "core/config.hpp"

namespace vlessbench {

struct links_options {
  std::string host;        // address clients dial; empty: the listener's own (must not be 0.0.0.0)
  std::string sni = "localhost";
  bool qr = true;          // terminal QR code of each share link
};

// Throws std::runtime_error when a listener has no usable address and no host was given.
void print_links(std::ostream& out, const config& cfg, const links_options& opts);

// The QR code of text as terminal lines (two modules per character, quiet zone included).
std::string terminal_qr(const std::string& text);

}  // namespace vlessbench
