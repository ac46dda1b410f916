#pragma once
// The browser probe (GET /probe, docs/probe.md): one self-contained HTML page with its script and
// style inline — no external scripts, fonts or CDNs, so a phone behind the client under test loads
// it from the target alone. Plain ES2017 (Safari on iOS, Chromium, Firefox).
#include <string>
#include <string_view>

namespace vlessbench::target {

// The page with the run id and results token issued to this load (target/probe_runs.hpp); the
// stall threshold in it is core/wire/route_header.hpp's.
std::string probe_page(std::string_view run, std::string_view token);

}  // namespace vlessbench::target
