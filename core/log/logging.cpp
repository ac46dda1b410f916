#include "core/log/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace vlessbench {

void setup_logging(std::string_view level) {
  static bool created = false;
  if (!created) {
    auto logger = spdlog::stderr_color_mt("vlessbenchd");
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    spdlog::set_default_logger(logger);
    created = true;
  }
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") lvl = spdlog::level::info;
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace vlessbench
