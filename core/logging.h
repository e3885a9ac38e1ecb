// Logging: spdlog behind two small helpers. Libraries log through the
// default spdlog logger; executables call InitLogging once with the
// level from their flags. Messages go to stderr so stdout stays for
// program output (JSON, tables).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "core/status.h"

namespace loft {

// level: trace | debug | info | warn | error | off.
Status InitLogging(const std::string& level, const std::string& program_name);

}  // namespace loft
