// Committing a partition on its worker's behalf: the one way both engines
// do it once a rule decided the ring applied it (departures.h,
// partition_timeouts.h, failure_reports.h, a re-registration). The
// partition is committed as its worker's PartitionDone of its open
// attempt (JobDriver::OnPartitionDone), only when the ring applied it
// (RingCommitter::CommitVotes > 0) and the ledger knows it.
//
// Not responsible for: rows, credits, counters, logs (the engine's
// bookkeeping of the commit), journaling the updates.
// Thread-safety: plain function over the caller's objects.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/ring_committer.h"

namespace loft::sched {

// The partition as it was before the commit (the ledger may prune it).
struct RingCommit {
  uint64_t id = 0;
  int64_t iteration = -1;
  int32_t worker = -1;
  double sent_ms = -1;
  int votes = 0;  // the other workers that named it applied
  Updates updates;
};

// Commits partition `id` for its worker when the ring applied it;
// nullopt (nothing changed) when the ledger does not know it or the ring
// did not apply it.
StatusOr<std::optional<RingCommit>> CommitForWorker(JobDriver& driver, const RingCommitter& ring, uint64_t id,
                                                    double now_ms);

}  // namespace loft::sched
