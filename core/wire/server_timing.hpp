#pragma once
// The Server-Timing durations a reader refuses (the header's format and parser: route_header.hpp,
// parse_server_timing, which leaves such a phase absent). A duration that is not a finite number
// >= 0 (nan, inf, -1e29) is no measurement: the runner records the sample as an error with this
// reason instead of a phase that would print as "nan ms" or drag a median below zero.
#include <optional>
#include <string>
#include <string_view>

namespace vlessbench {

// "vless;dur=nan is not a finite duration >= 0" for the first phase (tls, upgrade, vless,
// resolve, upstream; XHTTP's xget, xpost, xgap, xgapmax) so refused, the value as sent cut to 24 bytes; nullopt when
// every phase's duration is sound. Unknown metrics are not looked at, as parse_server_timing ignores them.
std::optional<std::string> refused_server_timing(std::string_view value);

}  // namespace vlessbench
