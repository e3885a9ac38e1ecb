// Logging: spdlog behind two small helpers. Libraries log through the
// default spdlog logger; executables call InitLogging once with the
// level from their flags. Messages go to stderr so stdout stays for
// program output (JSON, tables).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "core/status.h"

namespace loft {

// level: trace | debug | info | warn | error | off. Also routes protobuf's
// own log (a parse complaint per malformed message from the network, e.g.
// a string field that is not UTF-8) to spdlog: fatal ones as critical, the
// rest at debug and at most 10 per 10 s (core/log_limiter.h), so a hostile
// peer cannot flood the log through the parser.
Status InitLogging(const std::string& level, const std::string& program_name);

}  // namespace loft
