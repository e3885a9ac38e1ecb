#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace loft {

Status InitLogging(const std::string& level, const std::string& program_name) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level '" + level +
                           "' (expected trace, debug, info, warn, error or off)");
  }
  auto logger = spdlog::stderr_color_mt(program_name);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  return OkStatus();
}

}  // namespace loft
