#include "scheduler/accusations.h"

#include <algorithm>
#include <string>

namespace loft::sched {

int SilenceTolerance(int tolerance, int live_nodes) {
  if (live_nodes < 3) return 1 << 20;
  return std::max(tolerance, (live_nodes - 1) / 2);
}

int AccusationBook::ReportSilent(int reporter, int accused, const std::set<int>& live, int tolerance) {
  if (reporter == accused || evicted(accused) || evicted(reporter)) return -1;
  auto& heard_none = silent_by_reporter_[reporter];
  heard_none.insert(accused);
  if (live.size() >= 3 && live.count(reporter) > 0) {
    const bool all = std::all_of(live.begin(), live.end(),
                                 [&](int n) { return n == reporter || heard_none.count(n) > 0; });
    if (all) {
      evicted_.insert(reporter);
      return reporter;
    }
  }
  const int t = SilenceTolerance(tolerance, static_cast<int>(live.size()));
  return Report(reporter, accused, t) ? accused : -1;
}

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

StatusOr<int> TakePeerReport(AccusationBook& book, const SchedulerState& state, int32_t reporter,
                             const v1::PeerReport& pr, int tolerance) {
  if (pr.accused() < 0 || pr.accused() >= state.spec().num_nodes() || pr.accused() == reporter)
    return InvalidArgument("peer report accuses node " + std::to_string(pr.accused()));
  if (pr.reason() == "silent") {
    const auto live = state.LiveNodes();
    return book.ReportSilent(reporter, pr.accused(), std::set<int>(live.begin(), live.end()), tolerance);
  }
  return book.Report(reporter, pr.accused(), tolerance) ? pr.accused() : -1;
}

}  // namespace loft::sched
