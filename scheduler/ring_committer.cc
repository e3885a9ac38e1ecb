#include "scheduler/ring_committer.h"

namespace loft::sched {

void RingCommitter::OnPlanned(int64_t iteration, int workers) {
  workers_[iteration] = workers;
}

int RingCommitter::RecordVotes(const Ledger& ledger, int64_t iteration, int32_t reporter,
                               const loft::v1::TrainingReport& t) {
  if (t.applied_partitions_size() == 0 || t.applied_nodes_size() != t.applied_partitions_size() ||
      workers_.count(iteration) == 0)
    return 0;
  std::map<std::pair<uint64_t, int32_t>, std::set<int32_t>>* votes = nullptr;
  int dropped = 0;
  for (int k = 0; k < t.applied_partitions_size(); ++k) {
    const auto* r = ledger.Find(t.applied_partitions(k));
    if (r == nullptr || r->partition.iteration() != iteration ||
        r->partition.worker() != t.applied_nodes(k)) {
      ++dropped;
      continue;
    }
    if (votes == nullptr) votes = &votes_[iteration];
    (*votes)[{t.applied_partitions(k), t.applied_nodes(k)}].insert(reporter);
  }
  return dropped;
}

int RingCommitter::CommitVotes(const PartitionRecord& rec) const {
  if (IsTerminal(rec.state)) return 0;
  const int64_t iteration = rec.partition.iteration();
  auto votes = votes_.find(iteration);
  auto workers = workers_.find(iteration);
  if (votes == votes_.end() || workers == workers_.end()) return 0;
  const int32_t worker = rec.partition.worker();
  // Only votes for the partition as named by its own worker count.
  auto reporters = votes->second.find({rec.partition.id(), worker});
  if (reporters == votes->second.end()) return 0;
  // Its own worker's word does not count (it could drop its samples so).
  const int others = static_cast<int>(reporters->second.size()) - (reporters->second.count(worker) ? 1 : 0);
  return 2 * others > workers->second ? others : 0;
}

int RingCommitter::AppliedCount(int64_t iteration) const {
  auto workers = workers_.find(iteration);
  if (workers == workers_.end()) return -1;
  int applied = 0;
  auto votes = votes_.find(iteration);
  if (votes == votes_.end()) return 0;
  for (const auto& [key, reporters] : votes->second) {
    const int others = static_cast<int>(reporters.size()) - (reporters.count(key.second) ? 1 : 0);
    applied += 2 * others > workers->second ? 1 : 0;
  }
  return applied;
}

void RingCommitter::Close(int64_t iteration) {
  votes_.erase(iteration);
  workers_.erase(iteration);
}

int RingCommitter::workers(int64_t iteration) const {
  auto it = workers_.find(iteration);
  return it == workers_.end() ? 0 : it->second;
}

}  // namespace loft::sched
