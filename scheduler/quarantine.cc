#include "scheduler/quarantine.h"

#include <string>

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

Status SampleQuarantine::Restore(std::map<uint64_t, int32_t> reports, std::set<uint64_t> quarantined,
                                 int64_t unavailable) {
  for (const auto& [id, n] : reports) {
    if (n < 1 || (after_ > 0 && n >= after_) || quarantined.count(id) != 0) {
      return InvalidArgument("quarantine: sample " + std::to_string(id) + " has " + std::to_string(n) +
                             " pending reports (quarantined after " + std::to_string(after_) + ")");
    }
  }
  if (unavailable < 0) return InvalidArgument("quarantine: unavailable < 0");
  reports_ = std::move(reports);
  quarantined_ = std::move(quarantined);
  unavailable_ = unavailable;
  return OkStatus();
}

}  // namespace loft::sched
