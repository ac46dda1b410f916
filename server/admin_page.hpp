#pragma once
// The admin dashboard (GET / on the admin listener, docs/dashboard.md): one
// self-contained HTML page, script and style inline, no external resources. It
// polls /api/state every second and builds every element with textContent,
// never innerHTML: SNI, user agents, paths and names come from the network. The
// Content-Security-Policy sent with it allows only these inline blocks (by
// hash) and same-origin fetches.
#include <string_view>

namespace vlessbench::admin {

std::string_view dashboard_page();
std::string_view dashboard_csp();

}  // namespace vlessbench::admin
