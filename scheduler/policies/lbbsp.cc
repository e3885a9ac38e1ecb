#include "scheduler/policies/lbbsp.h"

#include <vector>

#include "scheduler/policies/apportion.h"

namespace loft::sched {

StatusOr<Plan> LbBspPolicy::PlanIteration(const PlanRequest& req) {
  std::vector<double> weights(req.workers.size());
  for (size_t i = 0; i < req.workers.size(); ++i) {
    const WorkerInput& w = req.workers[i];
    auto it = throughput_.find(w.node);
    if (it != throughput_.end()) {
      weights[i] = it->second;
    } else if (w.cost.compute_per_sample_ms > 0) {
      weights[i] = 1.0 / w.cost.compute_per_sample_ms;
    } else if (w.cost.compute_fixed_ms > 0) {
      weights[i] = 1.0 / w.cost.compute_fixed_ms;
    } else {
      weights[i] = 1.0;
    }
  }
  return ShufflePlanFromWeights(req, weights, name());
}

void LbBspPolicy::Observe(std::span<const Observation> observations) {
  for (const Observation& o : observations) {
    if (o.batch <= 0 || !(o.compute_ms > 0)) continue;  // nothing learnt from an empty or untimed partition
    const double sample = static_cast<double>(o.batch) / o.compute_ms;
    auto [it, inserted] = throughput_.emplace(o.node, sample);
    if (!inserted) it->second = alpha_ * sample + (1 - alpha_) * it->second;
  }
}

double LbBspPolicy::throughput(int32_t node) const {
  auto it = throughput_.find(node);
  return it == throughput_.end() ? 0.0 : it->second;
}

}  // namespace loft::sched
