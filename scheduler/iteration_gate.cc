#include "scheduler/iteration_gate.h"

#include <algorithm>
#include <cmath>

#include "core/read_ahead.h"

namespace loft::sched {

// An agent holds as many read partitions as the deepest plan-ahead sends it.
static_assert(kExchangeReadAhead == kMaxPlanAhead);

int AutoPlanAhead(bool overlap, double control_ms, double predicted_ms) {
  const int base = overlap ? 1 : 0;
  if (!(control_ms > 0)) return base;
  if (!(predicted_ms > 0)) return kMaxPlanAhead;
  // 1e-9 on the ratio keeps a control path of exactly k·T at depth k.
  const double k = std::ceil(control_ms / predicted_ms - 1e-9);
  return static_cast<int>(std::min<double>(kMaxPlanAhead, base + std::max(0.0, k)));
}

IterationGate::IterationGate(IterationGateOptions options, int num_nodes)
    : options_(options),
      need_(options.min_workers > 0 ? std::min(options.min_workers, num_nodes) : num_nodes),
      last_planned_workers_(static_cast<size_t>(num_nodes), 0) {
  depth_ = options_.plan_ahead >= 0 ? options_.plan_ahead
                                    : AutoPlanAhead(options_.overlap, options_.control_ms, 0);
}

bool IterationGate::Finished(const SchedulerState& st) const {
  return AllPlanned(st) && st.ledger().in_flight() == 0;
}

bool IterationGate::ReadyToPlan(const SchedulerState& st, bool send_queues_empty) const {
  if (st.ledger().in_flight() == 0) return true;  // every iteration complete (BSP)
  // Auto depth: deeper while a round's exchange runs with exchange overlap.
  const int depth =
      options_.plan_ahead < 0 ? std::max(depth_, st.exchange().ReadAhead(kMaxPlanAhead)) : depth_;
  if (depth < 1) return false;
  const int64_t running = st.last_iteration();
  // (a) only the last plan_ahead iterations are open; (b) all of `running`
  // sent; (c) same view; (d) every live node has a partition of it.
  if (running != last_planned_iteration_ || st.view() != last_planned_view_) return false;
  int64_t open = 0;
  for (int64_t k = 0; k < depth && running - k >= 0; ++k) open += st.ledger().OpenInIteration(running - k);
  if (st.ledger().in_flight() != open) return false;
  if (!send_queues_empty) return false;
  for (int32_t node : st.LiveNodes()) {
    if (!last_planned_workers_[static_cast<size_t>(node)]) return false;
  }
  return true;
}

int IterationGate::OnPlanned(int64_t iteration, int64_t view, const std::vector<char>& workers_with_samples,
                             double predicted_ms) {
  if (options_.plan_ahead < 0) depth_ = AutoPlanAhead(options_.overlap, options_.control_ms, predicted_ms);
  last_planned_iteration_ = iteration;
  last_planned_view_ = view;
  last_planned_workers_ = workers_with_samples;
  last_planned_workers_.resize(std::max(last_planned_workers_.size(), workers_with_samples.size()), 0);
  return static_cast<int>(std::count(last_planned_workers_.begin(), last_planned_workers_.end(), char{1}));
}

IterationGate::StartCheck IterationGate::CheckStart(const std::vector<WorkerReadiness>& live, bool when_ready,
                                                    double peers_wait_ms, double now_ms) {
  StartCheck c;
  for (const WorkerReadiness& w : live) c.live += w.connected && (w.confirmed || !when_ready) ? 1 : 0;
  if (!MayStart(c.live)) return c;
  if (when_ready && peers_wait_ms > 0) {
    for (const WorkerReadiness& w : live) {
      if (w.peers_ready < static_cast<int32_t>(live.size()) - 1) c.without_peers.push_back(w.node);
    }
    if (peers_wait_since_ms_ < 0) peers_wait_since_ms_ = now_ms;
    c.peers_waited_ms = now_ms - peers_wait_since_ms_;
    if (!c.without_peers.empty() && c.peers_waited_ms < peers_wait_ms) return c;
  }
  c.start = true;
  return c;
}

}  // namespace loft::sched
