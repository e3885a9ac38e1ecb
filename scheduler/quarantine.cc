#include "scheduler/quarantine.h"

namespace loft::sched {

bool SampleQuarantine::Report(uint64_t id) {
  if (after_ <= 0 || quarantined(id)) return false;
  auto it = reports_.try_emplace(id, 0).first;
  if (++it->second < after_) return false;
  reports_.erase(it);
  quarantined_.insert(id);
  return true;
}

int32_t SampleQuarantine::reports(uint64_t id) const {
  auto it = reports_.find(id);
  return it == reports_.end() ? 0 : it->second;
}

}  // namespace loft::sched
