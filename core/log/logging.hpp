#pragma once
// The human log (stderr, spdlog); the access log is separate (access_log.hpp).
#include <string_view>

#include <spdlog/spdlog.h>

namespace vlessbench {
// Level names as in the config: trace|debug|info|warn|error. Unknown names leave it at info.
void setup_logging(std::string_view level);
}  // namespace vlessbench
