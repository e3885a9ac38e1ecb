#include "scheduler/quarantine.h"

#include <algorithm>
#include <string>

namespace loft::sched {

namespace {
void InsertSorted(std::vector<int32_t>& v, int32_t x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it == v.end() || *it != x) v.insert(it, x);
}

bool StrictlyAscending(const std::vector<int32_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), [](int32_t a, int32_t b) { return a >= b; }) == v.end();
}
}  // namespace

bool SampleQuarantine::Report(uint64_t id, int32_t reporter, int32_t holder, int holders) {
  if (after_ <= 0 || quarantined(id)) return false;
  auto it = reports_.try_emplace(id).first;
  Pending& p = it->second;
  ++p.reports;
  InsertSorted(p.reporters, reporter);
  InsertSorted(p.holders, holder);
  const auto need_holders = static_cast<size_t>(std::max(1, std::min(after_, holders)));
  if (p.reporters.size() < static_cast<size_t>(after_) || p.holders.size() < need_holders) return false;
  reports_.erase(it);
  quarantined_.insert(id);
  return true;
}

int32_t SampleQuarantine::reports(uint64_t id) const {
  auto it = reports_.find(id);
  return it == reports_.end() ? 0 : it->second.reports;
}

const SampleQuarantine::Pending* SampleQuarantine::pending(uint64_t id) const {
  auto it = reports_.find(id);
  return it == reports_.end() ? nullptr : &it->second;
}

Status SampleQuarantine::Restore(std::map<uint64_t, Pending> reports, std::set<uint64_t> quarantined,
                                 int64_t unavailable) {
  for (const auto& [id, p] : reports) {
    if (p.reporters.empty() || p.holders.empty() || !StrictlyAscending(p.reporters) ||
        !StrictlyAscending(p.holders) || p.reports < static_cast<int32_t>(p.reporters.size()) ||
        quarantined.count(id) != 0) {
      return InvalidArgument("quarantine: sample " + std::to_string(id) + " has " +
                             std::to_string(p.reports) + " pending reports by " +
                             std::to_string(p.reporters.size()) + " distinct reporters of " +
                             std::to_string(p.holders.size()) + " holders' copies (quarantined after " +
                             std::to_string(after_) + ")");
    }
  }
  if (unavailable < 0) return InvalidArgument("quarantine: unavailable < 0");
  reports_ = std::move(reports);
  quarantined_ = std::move(quarantined);
  unavailable_ = unavailable;
  return OkStatus();
}

}  // namespace loft::sched
