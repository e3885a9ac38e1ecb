#include "edge_agent/ring_guard.h"

#include <algorithm>

namespace loft::agent {

bool RingGuard::OutOfWindow(int64_t last_round, int64_t round) const {
  const int64_t known = std::max(last_round, planned_);
  if (known < 0) return false;
  return round > known + options_.round_window;
}

bool RingGuard::Offence(int from) {
  ++total_;
  const int64_t n = ++offences_[from];
  const int64_t every = std::max<int64_t>(1, options_.report_after);
  return n % every == 0;
}

bool RingGuard::Silent(int from) {
  const int64_t n = ++silent_[from];
  return n % std::max<int64_t>(1, options_.silent_after) == 0;
}

int64_t RingGuard::offences(int from) const {
  auto it = offences_.find(from);
  return it == offences_.end() ? 0 : it->second;
}

}  // namespace loft::agent
