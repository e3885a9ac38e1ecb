#include "scheduler/failure_reports.h"

#include "scheduler/ledger.h"

namespace loft::sched {

StatusOr<FailureOutcome> OnFailureReport(JobDriver& driver, const RingCommitter& ring, int32_t node,
                                         const loft::v1::PartitionFailed& f, double now_ms,
                                         const std::function<Status(uint64_t)>& commit, Updates* failed) {
  failed->clear();
  const Ledger& ledger = driver.state().ledger();
  const PartitionRecord* rec = ledger.Find(f.partition_id());
  if (!WouldApply(rec, f.attempt(), node)) return FailureOutcome::kIgnored;
  if (ring.CommitVotes(*rec) > 0) {
    LOFT_RETURN_IF_ERROR(commit(f.partition_id()));
    return FailureOutcome::kCommittedByRing;
  }
  LOFT_ASSIGN_OR_RETURN(*failed, driver.OnPartitionFailed(f, now_ms));
  return FailureOutcome::kFailed;
}

}  // namespace loft::sched
