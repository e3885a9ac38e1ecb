#include "core/logging.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

#include "core/log_limiter.h"

namespace loft {
namespace {

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_FATAL) {
    spdlog::critical("protobuf {}:{}: {}", file, line, message);
    return;
  }
  if (!spdlog::should_log(spdlog::level::debug)) return;
  static std::mutex mu;
  static LogRateLimiter limiter(10, std::chrono::seconds(10));
  int64_t dropped = 0;
  {
    std::lock_guard lock(mu);
    if (!limiter.Allow(std::chrono::steady_clock::now(), &dropped)) return;
  }
  spdlog::debug("protobuf {}:{}: {}{}", file, line, PeerText(message, 2 * kPeerTextLogBytes),
                dropped > 0 ? fmt::format(" ({} similar lines not logged)", dropped) : "");
}

}  // namespace

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
  google::protobuf::SetLogHandler(&ProtobufLog);
  return OkStatus();
}

}  // namespace loft
