#include "scheduler/policies/lbbsp.h"

#include <cmath>
#include <string>
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

PolicyMemory LbBspPolicy::SaveMemory() const {
  PolicyMemory m;
  if (!throughput_.empty()) m["throughput"] = {throughput_.begin(), throughput_.end()};
  return m;
}

Status LbBspPolicy::RestoreMemory(const PolicyMemory& memory) {
  for (const auto& [table, values] : memory) {
    if (table != "throughput") return InvalidArgument("policy lbbsp: unknown memory table '" + table + "'");
    for (const auto& [node, v] : values) {
      if (!(v > 0) || !std::isfinite(v)) {
        return InvalidArgument("policy lbbsp: throughput of node " + std::to_string(node) + " is " +
                               std::to_string(v) + ", expected finite and > 0");
      }
    }
  }
  throughput_.clear();
  if (auto it = memory.find("throughput"); it != memory.end()) {
    throughput_.insert(it->second.begin(), it->second.end());
  }
  return OkStatus();
}

double LbBspPolicy::throughput(int32_t node) const {
  auto it = throughput_.find(node);
  return it == throughput_.end() ? 0.0 : it->second;
}

}  // namespace loft::sched
