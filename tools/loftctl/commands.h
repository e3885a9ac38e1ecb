// loftctl command groups. Each Register* adds subcommands to the app;
// the callback it installs runs the command and stores the process exit
// code in *exit_code (0 ok, 1 error, 2 usage, 3 verification failed).
#pragma once

#include <CLI/CLI.hpp>

namespace loft::ctl {

void RegisterCacheCommands(CLI::App& app, int* exit_code);      // ingest, cache stat|verify|get
void RegisterPlanCommands(CLI::App& app, int* exit_code);       // plan
void RegisterClusterCommands(CLI::App& app, int* exit_code);    // cluster run, status, keygen
void RegisterTestbedCommands(CLI::App& app, int* exit_code);    // testbed up|down|list|check|exec
void RegisterCalibrateCommands(CLI::App& app, int* exit_code);  // calibrate

}  // namespace loft::ctl
