// ServiceClock: the time loft-scheduler's service runs on (the now_ms of
// SchedulerService::Handle and Tick, hence of every journaled time, such
// as partition deadlines).
//  - Wall-clock anchored: milliseconds since the Unix epoch as read once at
//    start, advanced by the monotonic clock (so no NTP step moves it within
//    a process). A journaled deadline keeps its meaning in a restarted
//    scheduler, also after a reboot (CLOCK_MONOTONIC starts again at boot,
//    so a deadline from the old boot would lie days ahead).
//  - Stalls excluded: when two readings are more than max_step_ms apart,
//    the scheduler itself did not run (SIGSTOP, a paused VM, swapping);
//    only max_step_ms of that gap counts. Agents were not silent meanwhile
//    and their partitions were not late: their heartbeats and reports wait
//    in the socket behind the stall, and must not find them expired.
//    (The caller reads the clock at least every poll tick.)
//  - Never before the journal: NotBefore (a wall clock stepped back
//    between runs does not push recovered deadlines further ahead).
//
// Not responsible for: timers (the service and scheduler/ run them).
// Thread-safety: not thread-safe; the server's one thread reads it.
#pragma once

#include <cstdint>

#include "core/clock.h"

namespace loft::server {

class ServiceClock {
 public:
  // `clock` must outlive this. `max_step_ms` > 0.
  ServiceClock(Clock* clock, double max_step_ms);

  // Non-decreasing.
  double NowMillis();
  // From now on NowMillis() >= ms: a recovered scheduler resumes no earlier
  // than the latest time its journal records (scheduler/recovered_time.h),
  // also when the wall clock was stepped back between runs. Logs the step.
  void NotBefore(double ms);
  // Total time excluded as stalls so far.
  double stalled_ms() const { return stalled_ms_; }

 private:
  Clock* clock_;
  double max_step_ms_;
  double anchor_ms_;      // wall ms at start minus monotonic ms at start
  double last_raw_ = -1;  // the previous monotonic reading
  double stalled_ms_ = 0;
};

}  // namespace loft::server
