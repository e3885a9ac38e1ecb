#include "scheduler/policies/pid.h"

#include <cmath>
#include <string>
#include <vector>

#include "scheduler/policies/apportion.h"

namespace loft::sched {

StatusOr<Plan> PidPolicy::PlanIteration(const PlanRequest& req) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  const size_t n = req.workers.size();
  const double even = static_cast<double>(req.global_batch) / static_cast<double>(n);
  double t_sum = 0;
  int t_count = 0;
  for (const WorkerInput& w : req.workers) {
    auto it = last_ms_.find(w.node);
    if (it != last_ms_.end()) t_sum += it->second, ++t_count;
  }
  const double t_mean = t_count > 0 ? t_sum / t_count : 0.0;
  std::vector<double> target(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t node = req.workers[i].node;
    auto b = last_batch_.find(node);
    target[i] = b == last_batch_.end() ? even : static_cast<double>(b->second);
    auto t = last_ms_.find(node);
    if (b != last_batch_.end() && t != last_ms_.end() && t_mean > 0 && t->second > 0 &&
        std::abs(t->second - t_mean) / t_mean > dead_band_) {
      target[i] *= t_mean / t->second;
    }
    // A worker sized to 0 would never be re-measured; keep it reachable.
    target[i] = std::max(target[i], 1e-3);
  }
  LOFT_ASSIGN_OR_RETURN(Plan plan, ShufflePlanFromWeights(req, target, name()));
  for (const WorkerPlan& wp : plan.workers) last_batch_[wp.node] = wp.batch;
  return plan;
}

void PidPolicy::Observe(std::span<const Observation> observations) {
  for (const Observation& o : observations) {
    if (o.iteration_ms > 0) last_ms_[o.node] = o.iteration_ms;
  }
}

PolicyMemory PidPolicy::SaveMemory() const {
  PolicyMemory m;
  for (const auto& [node, b] : last_batch_) m["last_batch"][node] = static_cast<double>(b);
  for (const auto& [node, ms] : last_ms_) m["last_ms"][node] = ms;
  return m;
}

Status PidPolicy::RestoreMemory(const PolicyMemory& memory) {
  for (const auto& [table, values] : memory) {
    if (table != "last_batch" && table != "last_ms") {
      return InvalidArgument("policy pid: unknown memory table '" + table + "'");
    }
    for (const auto& [node, v] : values) {
      const bool ok =
          table == "last_batch" ? v >= 0 && v <= 9.0e15 && v == std::floor(v) : v > 0 && std::isfinite(v);
      if (!ok) {
        return InvalidArgument("policy pid: " + table + " of node " + std::to_string(node) + " is " +
                               std::to_string(v));
      }
    }
  }
  last_batch_.clear();
  last_ms_.clear();
  if (auto it = memory.find("last_batch"); it != memory.end()) {
    for (const auto& [node, v] : it->second) last_batch_[node] = static_cast<int64_t>(v);
  }
  if (auto it = memory.find("last_ms"); it != memory.end()) {
    last_ms_.insert(it->second.begin(), it->second.end());
  }
  return OkStatus();
}

}  // namespace loft::sched
