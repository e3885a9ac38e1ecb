#include "scheduler/holder_wait.h"

#include <algorithm>

#include "scheduler/scheduler_state.h"

namespace loft::sched {

HolderWait CheckHolderWait(const SchedulerState& state, double now_ms, bool only_if_expired) {
  HolderWait w;
  w.limit_ms = state.spec().scheduler.holder_wait_s * 1000.0;
  const int n = state.spec().num_nodes();
  const auto& live = state.live_mask();
  if (std::none_of(live.begin(), live.end(), [](bool a) { return a; })) return w;
  if (std::all_of(live.begin(), live.end(), [](bool a) { return a; })) return w;
  // The dead (not evicted) nodes holding pooled samples, and since when the
  // last of them is dead: O(nodes).
  double last_death = 0;
  for (int node = 0; node < n; ++node) {
    if (live[node] || state.evicted(node)) continue;
    const bool holds = state.sampler().available(node) > 0 ||
                       (state.previous_sampler() != nullptr && state.previous_sampler()->available(node) > 0);
    if (!holds) continue;
    w.dead_holders.push_back(node);
    last_death = std::max(last_death, state.dead_since_ms(node));
  }
  if (w.dead_holders.empty()) return w;
  w.waited_ms = std::max(0.0, now_ms - last_death);
  w.may_abandon = state.abandoned_at_iteration() < state.next_iteration();
  if (only_if_expired && !(w.may_abandon && w.waited_ms >= w.limit_ms)) return w;
  // Blocked on dead holders: the sampler planning would use has pooled
  // samples, none of them with a live holder: O(pooled).
  const EpochSampler& planning = state.planning_sampler();
  if (planning.pooled() == 0) return w;
  const int64_t assignable = planning.CountAssignable([&](uint64_t id) {
    for (int32_t h : state.placement().Holders(id)) {
      if (live[h]) return true;
    }
    return false;
  });
  if (assignable > 0) return w;
  w.waiting = true;
  w.samples = state.CountHeldOnlyByDeadNodes();
  return w;
}

}  // namespace loft::sched
