#pragma once
// What the admin listener answers with (docs/dashboard.md), from a state_hub
// snapshot: /metrics in the Prometheus text exposition format 0.0.4, /api/state
// as JSON. Pure: a snapshot in, text out.
#include <string>
#include <string_view>

#include "core/log/state_hub.hpp"

namespace vlessbench::admin {

// A label value escaped as the exposition format requires: backslash, double
// quote, line feed.
std::string escape_label(std::string_view v);

std::string format_metrics(const hub_snapshot& s, std::string_view version);
std::string format_state_json(const hub_snapshot& s, std::string_view version);

}  // namespace vlessbench::admin
