#include "target/index_page.hpp"

namespace vlessbench::target {
namespace {

constexpr std::string_view page_head = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vlessbench target</title>
<style>
body{font:16px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1240px;padding:12px 16px;color:#1b1b1b;background:#f6f6f4}
h1{font-size:1.35em;margin:.3em 0}
p{margin:.5em 0}
code{font:.92em ui-monospace,SFMono-Regular,Menlo,monospace;background:#ebebe7;padding:0 .25em;border-radius:3px}
.nodes{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,340px),1fr));gap:14px;margin:14px 0}
.node{background:#fff;border:1px solid #d8d8d2;border-radius:8px;padding:12px;min-width:0}
.node h2{font-size:1.08em;margin:0 0 .2em;overflow-wrap:anywhere}
.policy{display:inline-block;font-size:.85em;padding:1px 8px;border-radius:10px;background:#e3ecf7;color:#123}
.policy.on{background:#e2f3e4;color:#132}
.meta{font-size:.88em;color:#555;margin:.3em 0}
textarea{display:block;width:100%;box-sizing:border-box;font:12.5px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;resize:vertical;border:1px solid #ccc;border-radius:4px;padding:6px;background:#fcfcfb}
svg{display:block;width:100%;max-width:260px;height:auto;margin:10px auto 4px}
a.open{font-size:.9em}
</style></head><body>
<h1>vlessbench target</h1>
)";

constexpr std::string_view page_tail =
    R"(<p><a href="/probe">The browser probe</a>: time requests through this browser's proxy
and straight to this target, side by side.</p>
</body></html>
)";

// What the listener's tcp quickack means for the seed's measurement (docs/configuration.md).
std::string_view policy_words(std::string_view quickack) {
  if (quickack == "on") return "QUICKACK after every read";
  if (quickack == "off") return "delayed ACK forced";
  return "the kernel's delayed ACK";
}

}  // namespace

std::string qr_svg(const qr_matrix& m, int quiet) {
  if (m.width <= 0 || m.dark.size() != static_cast<std::size_t>(m.width) * static_cast<std::size_t>(m.width)) return {};
  const int size = m.width + 2 * quiet;
  const std::string s = std::to_string(size);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + s + " " + s +
                    "\" shape-rendering=\"crispEdges\" role=\"img\"><rect width=\"" + s + "\" height=\"" + s +
                    "\" fill=\"#fff\"/><path fill=\"#000\" d=\"";
  // One rectangle per horizontal run of dark modules.
  for (int y = 0; y < m.width; ++y) {
    for (int x = 0; x < m.width;) {
      if (!m.at(x, y)) {
        ++x;
        continue;
      }
      int run = 1;
      while (m.at(x + run, y)) ++run;
      out += 'M' + std::to_string(x + quiet) + ' ' + std::to_string(y + quiet) + 'h' + std::to_string(run) + "v1h-" +
             std::to_string(run) + 'z';
      x += run;
    }
  }
  out += "\"/></svg>";
  return out;
}

std::string index_page(const index_content& c) {
  std::string out(page_head);
  if (!c.links) {
    out +=
        "<p>This is the HTTP target of a vlessbench daemon. Its share links (they carry the user's UUID) are "
        "not shown on this page: this listener's <code>index_links</code> is off.</p>\n"
        "<p>To import the nodes into a client, run <code>vlessbenchd links --config FILE --host ADDRESS</code> on "
        "the machine (FILE: the config this daemon runs with, the package's is /etc/vlessbench/vlessbenchd.toml; it "
        "prints each share link with its QR code), read them on the appliance's console, or "
        "set <code>index_links = true</code> on this <code>[[target]]</code> and reload.</p>\n";
  } else if (c.nodes.empty()) {
    out += "<p>No node to show";
    if (!c.problem.empty()) out += ": " + html_escape(c.problem);
    out += ".</p>\n";
  } else {
    out +=
        "<p>Import a node into the client: scan its QR code, or copy its share link (Shadowrocket, v2rayN and "
        "NekoBox read it; <code>vlessbenchd links</code> prints the Clash, sing-box and Xray entries too). The "
        "links dial <code>" +
        html_escape(c.host) + "</code>.";
    bool kernel = false, quick = false;
    for (const auto& n : c.nodes) (n.quickack == "on" ? quick : kernel) = true;
    if (kernel && quick)
      out +=
          " The ACK policies side by side are the comparison: a Nagle-prone client stalls on a node with the "
          "kernel's delayed ACK, not on a QUICKACK one.";
    out += "</p>\n<div class=\"nodes\">\n";
    for (const auto& n : c.nodes) {
      const std::string link = html_escape(n.link);
      out += "<section class=\"node\"><h2>" + html_escape(n.name) + "</h2>\n<span class=\"policy" +
             std::string(n.quickack == "on" ? " on" : "") + "\">" + html_escape(n.listener) +
             ": tcp quickack=" + html_escape(n.quickack) + " (" + std::string(policy_words(n.quickack)) + ")</span>\n";
      out += "<p class=\"meta\">user " + html_escape(n.user) + ", transport " + html_escape(n.transport) +
             (n.vision ? ", flow xtls-rprx-vision" : "") + "</p>\n";
      out += "<textarea readonly rows=\"5\" aria-label=\"share link of " + html_escape(n.name) + "\">" + link +
             "</textarea>\n";
      out += qr_svg(n.qr);
      out += "\n<a class=\"open\" href=\"" + link + "\">Open in a client on this device</a></section>\n";
    }
    out += "</div>\n";
    if (c.left_out > 0)
      out += "<p>And " + std::to_string(c.left_out) +
             " more, not shown here: <code>vlessbenchd links --config FILE --host ADDRESS</code> on the machine "
             "(FILE: the config this daemon runs with) prints them all.</p>\n";
  }
  out += page_tail;
  return out;
}

}  // namespace vlessbench::target
