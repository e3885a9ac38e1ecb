#include "scheduler/liveness.h"

namespace loft::sched {

bool AffectedByDeath(const loft::v1::Partition& p, int32_t node) {
  if (p.worker() == node) return true;
  for (int32_t src : p.sources()) {
    if (src == node) return true;
  }
  return false;
}

std::vector<uint64_t> AffectedPartitions(const Ledger& ledger, int32_t node) {
  std::vector<uint64_t> out;
  for (uint64_t id : ledger.InFlight()) {
    if (AffectedByDeath(ledger.Find(id)->partition, node)) out.push_back(id);
  }
  return out;
}

}  // namespace loft::sched
