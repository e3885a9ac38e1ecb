#include "scheduler/partition_timeouts.h"

#include <algorithm>

namespace loft::sched {

StatusOr<Updates> TimeOutPartitions(JobDriver& driver, const RingCommitter& ring, double now_ms,
                                    const std::function<Status(uint64_t)>& commit) {
  const Ledger& ledger = driver.state().ledger();
  for (uint64_t id : ledger.Expired(now_ms)) {
    const PartitionRecord* rec = ledger.Find(id);
    if (rec == nullptr || ring.CommitVotes(*rec) == 0) continue;
    LOFT_RETURN_IF_ERROR(commit(id));
  }
  // What is still expired (the commits are done now) times out.
  return driver.CheckTimeouts(now_ms);
}

double NextPartitionDeadline(const Ledger& ledger) {
  double next = std::numeric_limits<double>::infinity();
  for (uint64_t id : ledger.InFlight()) {
    const double d = ledger.Find(id)->deadline_ms;
    if (d > 0) next = std::min(next, d);
  }
  return next;
}

}  // namespace loft::sched
