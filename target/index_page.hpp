#pragma once
// GET / from a browser (Accept names text/html): an HTTP target's index page. With the listener's
// [[target]] index_links on, the nodes a client can import, each with its share link and QR code;
// off, how to get them elsewhere. The daemon makes the nodes (server/links.cpp: it holds the users
// and the QR encoder); this file only renders them, without I/O.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/markup.hpp"

namespace vlessbench::target {

// A QR code's modules, row by row, as the encoder made them (no quiet zone).
struct qr_matrix {
  int width = 0;
  std::vector<bool> dark;  // width * width, row-major
  bool at(int x, int y) const {
    if (x < 0 || y < 0 || x >= width || y >= width) return false;
    const auto w = static_cast<std::size_t>(width);
    return dark[static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)];
  }
};

// One importable node: a user on a VLESS listener (and, on raw TLS, the same with Vision).
struct index_node {
  std::string name;      // the share link's name: LISTENER-USER[-vision]
  std::string listener;  // the [[vless]] name, e.g. "default-ack"
  std::string user;
  std::string transport;  // "tls", "ws over plain TCP", ... (as `vlessbenchd links` prints it)
  std::string quickack;   // the listener's tcp quickack: "kernel", "on" or "off"
  bool vision = false;    // flow xtls-rprx-vision
  std::string link;       // vless://...
  qr_matrix qr;
};

struct index_content {
  bool links = false;  // the listener's index_links: false shows no node at all
  std::string host;    // what the links dial (the browser's Host, or [[target]] index_host)
  std::vector<index_node> nodes;
  std::size_t left_out = 0;  // nodes past the page's cap (`vlessbenchd links` prints them all)
  std::string problem;       // links on but none could be made (said on the page instead)
};

// What GET / answers a browser (target_context::index): the page, rendered once per config
// generation, listener and host and shared by every request for it; or, with links on, a refusal
// of a Host that names neither this target's address, localhost nor a configured name (DNS
// rebinding would otherwise let any web page read the share links and their UUIDs).
struct index_answer {
  bool misdirected = false;  // 421
  std::shared_ptr<const std::string> page;
};

// Text safe inside HTML element content and quoted attribute values (core/wire/markup.hpp).
using vlessbench::html_escape;

// The QR code as an inline SVG (one path, dark on white), with a quiet zone of `quiet` modules
// (4: ISO/IEC 18004's); scales to its box. An empty matrix gives an empty string.
std::string qr_svg(const qr_matrix& m, int quiet = 4);

// The whole page (HTML5, no script, inline style only: the response's Content-Security-Policy
// forbids anything else).
std::string index_page(const index_content& c);

}  // namespace vlessbench::target
