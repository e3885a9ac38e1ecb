#include "scheduler/policies/loft_epoch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace loft::sched {
namespace {

// Whether some serving peer's uplink time (Σ counts naming it × s/up) is
// (within 0.1 %) the plan's makespan.
bool UplinkBound(const PlanRequest& req, const Plan& plan) {
  // plan.workers is parallel to req.workers (checked by the caller's
  // ValidatePlanRequest + loft); served counts by node id, sorted.
  std::vector<std::pair<int32_t, int64_t>> served;
  for (const WorkerPlan& wp : plan.workers) {
    for (const auto& [peer, count] : wp.remote_from) served.emplace_back(peer, count);
  }
  if (served.empty()) return false;
  std::sort(served.begin(), served.end());
  for (const WorkerInput& w : req.workers) {
    auto it = std::lower_bound(served.begin(), served.end(), std::make_pair(w.node, int64_t{0}),
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t s = 0;
    for (; it != served.end() && it->first == w.node; ++it) s += it->second;
    if (s > 0 && static_cast<double>(s) * w.cost.uplink_per_sample_ms >= 0.999 * plan.makespan_ms)
      return true;
  }
  return false;
}

}  // namespace

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
  int64_t drain_base =
      req.unconsumed_in_epoch >= req.global_batch ? std::min(pool, req.unconsumed_in_epoch) : pool;
  // One plan at the steady rates (slack_) and, when alt_slack_ > slack_ and
  // that plan's makespan is set by a serving uplink, one with a little more
  // room; the faster of the two (the steady one unless `margin` faster).
  StatusOr<Plan> best = Internal("loft-epoch: no plan");
  // When the epoch's last iteration is partial (unconsumed not a multiple of
  // B), each worker keeps min(H_j, min_batch_j) back for it, so it is not forced to read its min_batch
  // remotely then; only when the rest still holds ≥ B.
  std::vector<int64_t> reserve(req.workers.size(), 0);
  if (req.iterations_left_in_epoch > 1 && req.unconsumed_in_epoch % req.global_batch != 0) {
    int64_t total_reserve = 0;
    for (size_t i = 0; i < req.workers.size(); ++i) {
      reserve[i] = std::min(req.workers[i].local_available, req.workers[i].min_batch);
      total_reserve += reserve[i];
    }
    if (drain_base - total_reserve >= req.global_batch && pool - total_reserve >= req.global_batch) {
      drain_base -= total_reserve;
    } else {
      std::fill(reserve.begin(), reserve.end(), 0);
    }
  }
  for (double slack : {slack_, alt_slack_}) {
    if (best.ok() && (slack <= slack_ || !UplinkBound(req, best.value()))) continue;
    PlanRequest capped = req;
    const double scale =
        static_cast<double>(req.global_batch) / static_cast<double>(drain_base) * (1.0 + slack);
    for (size_t i = 0; i < capped.workers.size(); ++i) {
      WorkerInput& w = capped.workers[i];
      const double target = static_cast<double>(w.local_available - reserve[i]) * scale;
      w.local_available =
          std::min(w.local_available - reserve[i], static_cast<int64_t>(std::ceil(target - 1e-9)));
      w.exclusive_available = -1;  // not used by loft; would exceed the cap
    }
    // The alternative's caps are looser, so the first plan's makespan is
    // reachable by its fractional model: a bracket for the bisection.
    // `capped` differs from the validated `req` only in lower
    // local_available (≥ 0) and exclusive_available = -1: still valid. The
    // plan comes back evaluated (EvaluateLocalityPlan) on the same nodes,
    // costs and overlap as `req`, so its makespan is req's.
    StatusOr<Plan> plan = loft_.PlanValidated(capped, best.ok() ? best.value().makespan_ms : 0.0);
    if (!plan.ok()) continue;
    if (!best.ok() || plan.value().makespan_ms < best.value().makespan_ms * (1 - margin_))
      best = std::move(plan);
  }
  if (!best.ok()) return best.status();
  Plan plan = std::move(best).value();
  plan.policy = std::string(name());
  return plan;
}

}  // namespace loft::sched
