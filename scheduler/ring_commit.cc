#include "scheduler/ring_commit.h"

#include <utility>

namespace loft::sched {

StatusOr<std::optional<RingCommit>> CommitForWorker(JobDriver& driver, const RingCommitter& ring, uint64_t id,
                                                    double now_ms) {
  const PartitionRecord* rec = driver.state().ledger().Find(id);
  if (rec == nullptr) return std::optional<RingCommit>();
  const int votes = ring.CommitVotes(*rec);
  if (votes == 0) return std::optional<RingCommit>();
  RingCommit c{.id = id,
               .iteration = rec->partition.iteration(),
               .worker = rec->partition.worker(),
               .sent_ms = rec->sent_ms,
               .votes = votes,
               .updates = {}};
  v1::PartitionDone d;
  d.set_partition_id(id);
  d.set_attempt(rec->partition.attempt());
  d.set_node(c.worker);
  LOFT_ASSIGN_OR_RETURN(c.updates, driver.OnPartitionDone(d, now_ms));
  return std::optional<RingCommit>(std::move(c));
}

}  // namespace loft::sched
