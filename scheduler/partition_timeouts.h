// Partition timeouts: one rule for the daemon's Tick and for loft-sim,
// which runs it at the time NextPartitionDeadline gives.
//  - Every partition is planned with a deadline: the plan's now_ms +
//    max(StateOptions::timeout_min_ms, timeout_factor × predicted_ms)
//    (SchedulerState; timeout_min_ms = 0: never).
//  - At now_ms, each partition in flight whose deadline passed
//    (Ledger::Expired: 0 < deadline <= now, ascending id) is committed on
//    its worker's behalf when its ring applied it (RingCommitter's rule;
//    the engine's `commit` does it), else timed out (JobDriver::
//    CheckTimeouts: PartitionTimedOut, its samples return to the pool).
//  - Either way a partition that was sent gives its credit back: its
//    assignment or ack was probably lost (CreditWindow::OnFinished(true),
//    or Grant(1) after a commit; flow_control.h). The worker's agent, which
//    may still run it, gets no word: its late ack changes nothing
//    (WouldApply) but its CreditGrant.
//
// Not responsible for: clocks (now_ms comes in), sending, rows (the
// engines record a timed-out partition's row as a failed one,
// open_iterations.h).
// Thread-safety: plain functions over the caller's objects.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/ledger.h"
#include "scheduler/ring_committer.h"

namespace loft::sched {

// Runs the rule at now_ms: `commit(id)` for each expired partition the
// ring applied (in ledger order), then the driver's PartitionTimedOut
// updates for the rest, which are returned (the engine records them).
StatusOr<Updates> TimeOutPartitions(JobDriver& driver, const RingCommitter& ring, double now_ms,
                                    const std::function<Status(uint64_t)>& commit);

// The earliest deadline of a partition in flight; +infinity when none has
// one (nothing can time out before something new is planned).
double NextPartitionDeadline(const Ledger& ledger);

// The first time, on a clock of `resolution_ms` ticks, at which a
// partition with this deadline has expired on every engine's clock
// (Ledger::Expired is `deadline <= now`; the simulator's deadlines are on
// its microsecond clock, the daemon's on its own).
inline double PartitionExpiresAt(double deadline_ms, double resolution_ms) {
  return deadline_ms + resolution_ms;
}

}  // namespace loft::sched
