#include "tools/loftctl/exit_signals.h"

#include <signal.h>

#include <atomic>

namespace loft::ctl {
namespace {

std::atomic<int> g_exit_signal{0};

void OnExitSignal(int sig) {
  int none = 0;
  g_exit_signal.compare_exchange_strong(none, sig);
}

}  // namespace

void InstallExitSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnExitSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(sig, &sa, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, nullptr);
}

int ExitSignal() {
  return g_exit_signal.load();
}

const char* ExitSignalName(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "a signal";
  }
}

}  // namespace loft::ctl
