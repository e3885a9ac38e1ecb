// loftctl: the operator's command-line tool.
#include <cstdio>

#include "core/logging.h"
#include "tools/loftctl/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"loftctl: operate loft caches, plans and clusters"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();
  int exit_code = 0;
  loft::ctl::RegisterCacheCommands(app, &exit_code);
  loft::ctl::RegisterPlanCommands(app, &exit_code);
  loft::ctl::RegisterClusterCommands(app, &exit_code);
  loft::ctl::RegisterTestbedCommands(app, &exit_code);
  loft::ctl::RegisterCalibrateCommands(app, &exit_code);
  app.parse_complete_callback([&] {
    auto st = loft::InitLogging(log_level, "loftctl");
    if (!st.ok()) throw CLI::ValidationError("--log-level", st.message());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
