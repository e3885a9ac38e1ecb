// The processes `loftctl cluster run` starts (scheduler, agents, --trainer
// commands) and how it tells an exit it caused (Stop, KillNow: shutdown,
// failure injection) from one it did not (Poll records the wait status):
// an unexpected exit fails the run at once (docs/pytorch.md, "When a trainer dies").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace loft::ctl {

// A child process with its stdout and stderr appended to a log file.
struct Child {
  std::string name;  // "scheduler", the node name, "trainer-<node>"
  std::vector<std::string> argv;
  std::string log;
  bool own_group = false;  // its own process group: Stop also ends what it started
  pid_t pid = -1;          // > 0 while running
  pid_t pgid = -1;         // own_group: the group to signal, kept after the leader exits
  // Set by Poll when the process exited on its own (not by Stop/KillNow);
  // cleared by Spawn.
  std::optional<int> wait_status{};
  double exited_at_s = 0;  // Poll's `now_s` when it saw the exit
};

Status Spawn(Child& c);
// Reaps the child if it has exited: records wait_status and exited_at_s,
// returns true. False while it runs or when it is not running (pid <= 0).
bool Poll(Child& c, double now_s);
// SIGTERM to each (to the group when own_group), wait up to `grace_ms`
// for all of them together, then SIGKILL what is left. Reaps them. An exit
// seen here is not recorded.
void StopAll(const std::vector<Child*>& children, int grace_ms);
void Stop(Child& c, int grace_ms);
// Orphans of the children (what a trainer command started in the
// background) are reparented to this process, so StopAll can reap them and
// see a group gone at once (prctl PR_SET_CHILD_SUBREAPER). An error names
// the prctl failure (the caller logs it and goes on).
Status BecomeSubreaper();
// SIGKILL (failure injection). Reaps the child and, for up to ~2 s, the
// rest of its group; nothing recorded.
void KillNow(Child& c);

// "status 3", "status 0", "signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);
// The last `lines` non-empty lines of a text file ("" when unreadable).
std::string LogTail(const std::string& path, int lines);

// What an exit a launcher did not cause means for the run. Pure.
enum class ExitVerdict {
  kFail,  // fail the run now
  kWait,  // a trainer that ended after its last round: the job should end within the grace
  kOk,    // a trainer's normal end: status 0 once the job has ended
};
struct JobProgress {
  bool finished = false;
  int64_t iteration = -1;       // the scheduler's current iteration (-1 before the start)
  int64_t last_iteration = -1;  // the job's last iteration (iterations - 1)
};
// A trainer must consume batches until the job ends: any exit but status 0
// fails the run; status 0 is a normal end once the job finished, worth
// `grace_s` of waiting while the job is in its last iteration (the trainer
// acknowledged its last batch, the scheduler may not have committed every
// partition yet), a failure before that.
ExitVerdict JudgeTrainerExit(int wait_status, const JobProgress& job, double seconds_since_exit,
                             double grace_s);

// The run's error for a child that exited on its own: `what` ("the trainer
// of node edge-0"), its exit status, where the job was, its log's path and
// last lines.
Status ChildExitError(const Child& c, const std::string& what, bool trainer, const JobProgress& job,
                      int tail_lines = 8);

}  // namespace loft::ctl
