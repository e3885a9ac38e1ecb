#include "scheduler/recovered_time.h"

#include <algorithm>

namespace loft::sched {

double LatestRecordedMs(const Ledger& ledger) {
  double latest = 0;
  ledger.ForEachRecord([&latest](const PartitionRecord& r) {
    latest = std::max({latest, r.planned_ms, r.sent_ms, r.finished_ms});
  });
  return latest;
}

}  // namespace loft::sched
