#include "tools/loftctl/commands.h"

namespace loft::ctl {

void RegisterClusterCommands(CLI::App& app, int* exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace loft::ctl
