#include "scheduler/accusations.h"

#include <algorithm>

namespace loft::scheduler {

bool AccusationBook::Report(int reporter, int accused, int tolerance) {
  if (reporter == accused || evicted(accused)) return false;
  auto& r = reporters_[accused];
  r.insert(reporter);
  if (static_cast<int>(r.size()) < std::max(0, tolerance) + 1) return false;
  evicted_.insert(accused);
  return true;
}

size_t AccusationBook::reporters(int accused) const {
  auto it = reporters_.find(accused);
  return it == reporters_.end() ? 0 : it->second.size();
}

}  // namespace loft::scheduler
