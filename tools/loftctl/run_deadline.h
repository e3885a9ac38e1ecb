// When `loftctl cluster run` stops a job that has not finished (the run
// then still writes summary.json, iterations.csv and training.csv of what
// it did, marked "stopped"; tools/loftctl/README.md):
//   - no progress: no iteration completed for `no_progress_s` seconds,
//     counted from the watch's start and from each completed iteration.
//     A run that keeps completing iterations is never stopped by it,
//     however long it takes.
//   - deadline: `deadline_s` seconds after the watch's start, progress or
//     not (an explicit limit; 0 = none, the default).
// Pure: time and progress come in as arguments.
// Not responsible for: interrupts (the caller), reading the scheduler's
// status, stopping processes.
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace loft::ctl {

// `loftctl cluster run --no-progress-timeout-s`'s default.
inline constexpr double kDefaultNoProgressS = 300;

struct RunDeadlines {
  double no_progress_s = kDefaultNoProgressS;  // > 0; 0 = never
  double deadline_s = 0;                       // 0 = none
  Status Validate() const;
};

// Why a run was stopped before its job finished: `reason` is summary.json's
// stopped.reason ("interrupted", "no_progress", "deadline"); `status` the
// run's error (Aborted for an interrupt: exit status 130; DeadlineExceeded: 1).
struct RunStop {
  std::string reason;
  Status status;
};

class ProgressWatch {
 public:
  ProgressWatch(RunDeadlines deadlines, double start_s)
      : d_(deadlines), start_s_(start_s), progress_s_(start_s) {}
  // The scheduler's count of completed iterations, read at `now_s`. A count
  // above the last one seen is progress.
  void Observe(int64_t iterations_completed, double now_s);
  // The stop due at `now_s`, if any (the explicit deadline first).
  std::optional<RunStop> Due(double now_s) const;
  int64_t iterations_completed() const { return completed_; }

 private:
  RunDeadlines d_;
  double start_s_;
  double progress_s_;  // when the last progress was seen (the start before any)
  int64_t completed_ = 0;
};

}  // namespace loft::ctl
