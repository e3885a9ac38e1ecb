#include "scheduler/iteration_gate.h"

#include <algorithm>

namespace loft::sched {

IterationGate::IterationGate(IterationGateOptions options, int num_nodes)
    : options_(options),
      need_(options.min_workers > 0 ? std::min(options.min_workers, num_nodes) : num_nodes),
      last_planned_workers_(static_cast<size_t>(num_nodes), 0) {}

bool IterationGate::Finished(const SchedulerState& st) const {
  return AllPlanned(st) && st.ledger().in_flight() == 0;
}

bool IterationGate::ReadyToPlan(const SchedulerState& st, bool send_queues_empty) const {
  if (st.ledger().in_flight() == 0) return true;  // every iteration complete (BSP)
  if (options_.plan_ahead < 1) return false;
  const int64_t running = st.last_iteration();
  // (a) only `running` is open; (b) all of it sent; (c) same view; (d)
  // every live node has a partition of it.
  if (running != last_planned_iteration_ || st.view() != last_planned_view_) return false;
  if (st.ledger().in_flight() != st.ledger().OpenInIteration(running)) return false;
  if (!send_queues_empty) return false;
  for (int32_t node : st.LiveNodes()) {
    if (!last_planned_workers_[static_cast<size_t>(node)]) return false;
  }
  return true;
}

int IterationGate::OnPlanned(int64_t iteration, int64_t view, const std::vector<char>& workers_with_samples) {
  last_planned_iteration_ = iteration;
  last_planned_view_ = view;
  last_planned_workers_ = workers_with_samples;
  last_planned_workers_.resize(std::max(last_planned_workers_.size(), workers_with_samples.size()), 0);
  return static_cast<int>(std::count(last_planned_workers_.begin(), last_planned_workers_.end(), char{1}));
}

}  // namespace loft::sched
