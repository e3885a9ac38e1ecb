// The signals that end a loftctl command through its clean-up instead of
// killing it on the spot: SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal
// went away) and SIGQUIT (Ctrl-\). The handler only records the first
// signal; the command polls ExitSignal() and unwinds, so destructors (the
// testbed's teardown among them) run. SIGPIPE is ignored: a closed stderr
// pipe then fails a write instead of ending the process (children get
// SIGPIPE back: Spawn and RunCommand reset it). SIGKILL cannot be
// caught: `loftctl testbed clean` (or the next `cluster run --testbed`)
// removes what such a run left.
//
// Not responsible for: what the command does once it sees the signal.
// Thread-safety: ExitSignal() may be called from any thread.
#pragma once

namespace loft::ctl {

// Installs the handler for the four signals (SA_RESTART: the set-up's
// waits for its child commands go on) and ignores SIGPIPE.
void InstallExitSignalHandlers();
// The first signal caught since InstallExitSignalHandlers; 0 = none.
int ExitSignal();
// "SIGHUP", …; "a signal" for others.
const char* ExitSignalName(int sig);

}  // namespace loft::ctl
