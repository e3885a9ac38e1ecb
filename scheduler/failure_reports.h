// A worker's PartitionFailed: the one rule for what it does.
//  - It changes nothing unless it is the worker's report of its open
//    attempt (WouldApply, ledger.h): then it is ignored (counted, not
//    journaled).
//  - Otherwise, when the partition's ring applied it (RingCommitter::
//    CommitVotes > 0), it is committed on its worker's behalf instead (the
//    engine's `commit`): the applied update already holds its samples.
//  - Otherwise it fails (JobDriver::OnPartitionFailed: its samples return
//    to the pool, bad samples count towards quarantine).
//
// Not responsible for: authentication, poisoning reports (poison_reports.h),
// logs, journaling the updates (the engine records them).
// Thread-safety: plain functions over the caller's objects.
#pragma once

#include <cstdint>
#include <functional>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/ring_committer.h"

namespace loft::sched {

enum class FailureOutcome : uint8_t { kIgnored, kCommittedByRing, kFailed };

// The rule above for `node`'s report `f` at now_ms. For kFailed the
// driver's updates are in *failed (left empty otherwise).
StatusOr<FailureOutcome> OnFailureReport(JobDriver& driver, const RingCommitter& ring, int32_t node,
                                         const loft::v1::PartitionFailed& f, double now_ms,
                                         const std::function<Status(uint64_t)>& commit, Updates* failed);

}  // namespace loft::sched
