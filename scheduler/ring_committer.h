// RingCommitter: the ring's votes and the commit rule. Each training
// worker's ack carries the partitions the ring applied for its iteration
// (TrainingReport.applied_partitions, with the member that named each:
// applied_nodes). A partition in flight that would fail (its worker died
// or re-registered, it timed out, or its worker reported a failure) is
// committed on its worker's behalf instead of being retried, which would
// train its samples twice, when reports from MORE THAN HALF of its
// iteration's workers, other than its own worker, name it as applied.
// Only votes for a partition of that open iteration, named by its own
// worker, count (junk, other iterations' or other members' partitions
// cost no memory and never count).
//
// Not responsible for: committing (the caller acks through the JobDriver),
// training statistics.
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "core/proto/loft.pb.h"
#include "scheduler/ledger.h"

namespace loft::sched {

class RingCommitter {
 public:
  // An iteration was planned on `workers` distinct workers (with samples).
  void OnPlanned(int64_t iteration, int workers);
  // Records `reporter`'s votes from its training report for `iteration`
  // (ignored unless the iteration was planned here and is open). Returns
  // how many applied pairs were dropped as not that iteration's
  // partitions named by their worker.
  int RecordVotes(const Ledger& ledger, int64_t iteration, int32_t reporter,
                  const loft::v1::TrainingReport& t);
  // The commit rule for a partition about to fail: the number of other
  // workers that vote for it when they are more than half of its
  // iteration's workers, else 0 (do not commit).
  int CommitVotes(const PartitionRecord& rec) const;
  // Partitions of `iteration` that the rule would commit (its "applied"
  // count); -1 when the iteration is unknown here.
  int AppliedCount(int64_t iteration) const;
  // The iteration closed: its votes are dropped.
  void Close(int64_t iteration);
  // Workers `iteration` was planned on; 0 when unknown.
  int workers(int64_t iteration) const;

 private:
  // Per open iteration: (partition id, the member that named it) ->
  // reporting workers.
  std::map<int64_t, std::map<std::pair<uint64_t, int32_t>, std::set<int32_t>>> votes_;
  std::map<int64_t, int> workers_;
};

}  // namespace loft::sched
