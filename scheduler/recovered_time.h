// When a recovered scheduler resumes. Service time is wall-clock anchored
// (server/service_clock.h) and every journaled time (a partition's
// deadline) is in it, so a wall clock stepped back between two runs would
// move every recovered deadline further ahead by the step (an hour back:
// the partitions in flight wait an hour more before they time out). A
// recovered scheduler therefore resumes no earlier than the latest time
// its ledger records (a partition planned, sent or finished): no recovered
// deadline then lies further ahead than it did at that last event, and
// none more than its own timeout past it, whatever the wall clock did.
// A step forward cannot be told from downtime: the partitions in flight
// time out and are retried through lineage, as after a long outage.
//
// Not responsible for: reading clocks (the server's ServiceClock applies
// the result), journaling.
// Thread-safety: pure functions.
#pragma once

#include "scheduler/ledger.h"

namespace loft::sched {

// The latest planned, sent or finished time of any partition the ledger
// holds; 0 when it holds none.
double LatestRecordedMs(const Ledger& ledger);

// The service time to resume at: clock_now_ms, or latest_recorded_ms when
// the clock reads earlier (it was stepped back).
inline double ResumeAtMs(double clock_now_ms, double latest_recorded_ms) {
  return clock_now_ms < latest_recorded_ms ? latest_recorded_ms : clock_now_ms;
}

}  // namespace loft::sched
