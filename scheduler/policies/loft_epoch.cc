#include "scheduler/policies/loft_epoch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace loft::sched {

StatusOr<Plan> LoftEpochPolicy::PlanIteration(const PlanRequest& req) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  int64_t pool = 0;
  for (const WorkerInput& w : req.workers) pool += w.local_available;
  if (pool < req.global_batch) {
    return FailedPrecondition(fmt::format(
        "loft-epoch: live workers cache {} unconsumed samples in total, fewer than global_batch {}", pool,
        req.global_batch));
  }
  // ΣH over-counts with replication (a sample held twice is in two
  // local_available); unconsumed_in_epoch counts it once. The smaller of the
  // two keeps Σ caps ≥ B (dead nodes' samples are in unconsumed_in_epoch
  // but not in the pool).
  const int64_t drain_base =
      req.unconsumed_in_epoch >= req.global_batch ? std::min(pool, req.unconsumed_in_epoch) : pool;
  // One plan at the steady rates (slack_) and, when alt_slack_ > slack_, one
  // with a little more room; the faster of the two (the steady one on ties).
  StatusOr<Plan> best = Internal("loft-epoch: no plan");
  for (double slack : {slack_, alt_slack_}) {
    if (best.ok() && slack <= slack_) continue;
    PlanRequest capped = req;
    const double scale =
        static_cast<double>(req.global_batch) / static_cast<double>(drain_base) * (1.0 + slack);
    for (WorkerInput& w : capped.workers) {
      const double target = static_cast<double>(w.local_available) * scale;
      w.local_available = std::min(w.local_available, static_cast<int64_t>(std::ceil(target - 1e-9)));
    }
    StatusOr<Plan> plan = loft_.PlanIteration(capped);
    if (!plan.ok()) continue;
    EvaluateLocalityPlan(req, plan.value());
    if (!best.ok() || plan.value().makespan_ms < best.value().makespan_ms * (1 - margin_))
      best = std::move(plan);
  }
  if (!best.ok()) return best.status();
  Plan plan = std::move(best).value();
  plan.policy = std::string(name());
  return plan;
}

}  // namespace loft::sched
