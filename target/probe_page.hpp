#pragma once
// The browser probe (GET /probe, docs/probe.md): one self-contained HTML page with its script and
// style inline — no external scripts, fonts or CDNs, so a phone behind the client under test loads
// it from the target alone. Plain ES2017 (Safari on iOS, Chromium, Firefox).
#include <string_view>

namespace vlessbench::target {

// The page, built once; the stall threshold in it is core/route_header.hpp's.
std::string_view probe_page();

}  // namespace vlessbench::target
