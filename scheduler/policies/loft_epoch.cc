#include "scheduler/policies/loft_epoch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "scheduler/policies/apportion.h"
#include "scheduler/policies/drain_search.h"

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

// Whether the request's pools overlap (a sample cached on two live
// workers): then drains are not pinned per node.
bool Replicated(const PlanRequest& req, int64_t pool) {
  if (pool > req.unconsumed_in_epoch) return true;
  for (const WorkerInput& w : req.workers) {
    if (w.exclusive_available >= 0 && w.exclusive_available < w.local_available) return true;
  }
  return false;
}

// What `plan` consumes from each node (its local reads plus what it
// serves), subtracted from a copy of `req`: the next iteration's request
// under the cost model (the rollout's state; the real scheduler rebuilds it
// from the sampler). False when nothing is left to plan.
bool Advance(PlanRequest& req, const Plan& plan) {
  std::vector<int64_t> used(req.workers.size(), 0);
  std::vector<std::pair<int32_t, size_t>> index;
  for (size_t i = 0; i < req.workers.size(); ++i) index.emplace_back(req.workers[i].node, i);
  std::sort(index.begin(), index.end());
  for (size_t i = 0; i < plan.workers.size(); ++i) {
    used[i] += plan.workers[i].local;
    for (const auto& [peer, count] : plan.workers[i].remote_from) {
      auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(peer, size_t{0}));
      if (it != index.end() && it->first == peer) used[it->second] += count;
    }
  }
  int64_t pool = 0;
  for (size_t i = 0; i < req.workers.size(); ++i) {
    req.workers[i].local_available = std::max<int64_t>(0, req.workers[i].local_available - used[i]);
    req.workers[i].exclusive_available = -1;
    pool += req.workers[i].local_available;
  }
  req.unconsumed_in_epoch = std::max<int64_t>(0, req.unconsumed_in_epoch - req.global_batch);
  req.iterations_left_in_epoch -= 1;
  req.iteration += 1;
  if (req.iterations_left_in_epoch < 1 || pool == 0) return false;
  // The epoch's partial last iteration: the scheduler asks for what is left.
  const int64_t b = std::min(req.global_batch, pool);
  if (b < req.global_batch) {
    req.global_batch = b;
    int64_t sum_max = 0, sum_min = 0;
    for (WorkerInput& w : req.workers) {
      w.max_batch = std::min(w.max_batch, b);
      w.min_batch = std::min({w.min_batch, w.max_batch, b / static_cast<int64_t>(req.workers.size())});
      sum_max += w.max_batch;
      sum_min += w.min_batch;
    }
    if (sum_max < b || sum_min > b) return false;
  }
  return true;
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
  if (req.overlap && !req.pipelined) {
    // Planned with nothing in flight: the reads cannot overlap a previous
    // compute, so the batch sizes are chosen without overlap (same drains;
    // remote reads' latency is paid before the compute); predicted times
    // stay the cost model's with overlap. No rollout (its later iterations
    // would be pipelined).
    PlanRequest sequential = req;
    sequential.overlap = false;
    LOFT_ASSIGN_OR_RETURN(Plan plan, PlanStationary(sequential, pool));
    EvaluateLocalityPlan(req, plan);
    plan.policy = std::string(name());
    return plan;
  }
  LOFT_ASSIGN_OR_RETURN(Plan plan, PlanStationary(req, pool));
  const bool replicated = Replicated(req, pool);
  const int64_t left = req.iterations_left_in_epoch;
  const auto n = static_cast<int64_t>(req.workers.size());
  if (rollout_ && !replicated && left >= 2 && left <= kRolloutMaxIterations && n <= kRolloutMaxWorkers &&
      n * left <= kRolloutMaxWork) {
    // Rollout: greedy loft from here to the epoch's end against the
    // stationary drain from here, both under the cost model; this
    // iteration follows the cheaper one (README-planning.md).
    StatusOr<Plan> greedy = loft_.PlanValidated(req, 0.0);
    if (greedy.ok()) {
      const double stationary_total = RolloutTotal(req, plan, /*greedy=*/false);
      const double greedy_total = RolloutTotal(req, greedy.value(), /*greedy=*/true);
      if (greedy_total < stationary_total * (1 - 1e-9)) plan = std::move(greedy).value();
    }
  }
  plan.policy = std::string(name());
  return plan;
}

double LoftEpochPolicy::RolloutTotal(const PlanRequest& req, const Plan& first, bool greedy) {
  double total = first.makespan_ms;
  PlanRequest next = req;
  const Plan* plan = &first;
  StatusOr<Plan> step = Internal("rollout");
  while (Advance(next, *plan)) {
    int64_t pool = 0;
    for (const WorkerInput& w : next.workers) pool += w.local_available;
    step = greedy ? loft_.PlanValidated(next, 0.0) : PlanStationary(next, pool);
    if (!step.ok()) return std::numeric_limits<double>::infinity();
    total += step.value().makespan_ms;
    plan = &step.value();
  }
  return total;
}

StatusOr<Plan> LoftEpochPolicy::PlanStationary(const PlanRequest& req, int64_t pool) {
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
  if (!Replicated(req, pool)) {
    // Without replication the stationary drain of node j is pinned: h_j =
    // (H_j − reserve_j)·B / Σ(H − reserve) per iteration (bound-epoch's LP
    // has d_j = h_j). Integer drains by largest remainder, Σ = B exactly;
    // the rounding residue is carried because the next iteration's h_j is
    // derived from what is actually left. loft plans the iteration on pools
    // equal to the drains (a tight pool: everything offered is taken), the
    // drain search then balances it.
    std::vector<double> weights(req.workers.size());
    std::vector<int64_t> mins(req.workers.size(), 0), maxs(req.workers.size());
    for (size_t i = 0; i < req.workers.size(); ++i) {
      maxs[i] = req.workers[i].local_available - reserve[i];
      weights[i] = static_cast<double>(maxs[i]);
    }
    StatusOr<std::vector<int64_t>> drains = Apportion(weights, mins, maxs, req.global_batch);
    if (drains.ok()) {
      PlanRequest tight = req;
      for (size_t i = 0; i < tight.workers.size(); ++i) {
        tight.workers[i].local_available = drains.value()[i];
        tight.workers[i].exclusive_available = -1;
      }
      StatusOr<Plan> plan = loft_.PlanValidated(tight, 0.0);
      if (plan.ok()) {
        ImproveFixedDrainPlan(tight, plan.value());
        return plan;
      }
    }
  }
  // With replication (or if the tight plan fails): caps instead of exact
  // drains.
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
  return best;
}

}  // namespace loft::sched
