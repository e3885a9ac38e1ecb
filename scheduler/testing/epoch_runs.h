// Whole-epoch runs of a policy under the cost model (no jitter, no link
// contention, no replication): each plan consumes `local` samples from the
// worker and the remote_from counts from the serving peers, the next
// request sees what is left. Used by the loft-epoch tests and
// bench/epoch_quality_bench (scheduler/README-planning.md "loft-epoch").
// Also the epoch-suite instances: RandomInstance rescaled to exactly K
// whole iterations at the start of an epoch.
// Not responsible for: checking plans beyond what a run needs (Σ = B,
// bounds, availability: a violation is returned as an error).
// Thread-safety: pure functions.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "core/status.h"
#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched::testing {

struct EpochRun {
  std::vector<double> times;  // predicted makespan per iteration
  double mean = 0;
  double last_decile = 0;
  // With `check`: per iteration, the plan's makespan over the exact
  // fractional optimum of the same iteration with the plan's per-node
  // drains fixed (bound-epoch on pools = drains, B = Σ drains); worst
  // ratio, and how many iterations were within max(2 %, one sample's time
  // on the slowest worker) of it.
  double worst_vs_fixed_drain = 0;
  int64_t balanced_iterations = 0;
  std::vector<Plan> plans;  // with keep_plans
};

// bound-epoch's LP with every node's drain fixed to `drains`: the
// per-iteration exact optimum (relaxed counts) of that iteration.
inline StatusOr<double> FixedDrainBoundMs(PlanRequest req, const std::vector<int64_t>& drains) {
  int64_t sum = 0;
  for (size_t i = 0; i < req.workers.size(); ++i) {
    req.workers[i].local_available = drains[i];
    req.workers[i].exclusive_available = drains[i];
    sum += drains[i];
  }
  req.unconsumed_in_epoch = sum;
  req.iterations_left_in_epoch = 1;
  return EpochBoundMs(req);
}

// Drives `policy` through the rest of the epoch of `req` (K =
// iterations_left_in_epoch plans). InvalidArgument naming the iteration
// when a plan breaks Σ = B, min/max_batch or a node's availability.
inline StatusOr<EpochRun> DriveEpoch(Policy& policy, PlanRequest req, bool check = false,
                                     bool keep_plans = false) {
  const int64_t k = req.iterations_left_in_epoch;
  EpochRun run;
  for (int64_t it = 0; it < k; ++it) {
    req.iterations_left_in_epoch = k - it;
    if (req.unconsumed_in_epoch < req.global_batch) {
      // The epoch's partial last iteration: the scheduler asks for what is
      // left, with min/max_batch clamped (SchedulerState::BuildPlanRequest).
      const int64_t b = req.unconsumed_in_epoch;
      req.global_batch = b;
      for (WorkerInput& w : req.workers) {
        w.max_batch = std::min(w.max_batch, b);
        w.min_batch = std::min({w.min_batch, w.max_batch, b / static_cast<int64_t>(req.workers.size())});
      }
    }
    auto plan = policy.PlanIteration(req);
    if (!plan.ok()) return plan.status();
    int64_t sum = 0;
    std::map<int32_t, int64_t> used;
    for (size_t i = 0; i < req.workers.size(); ++i) {
      const WorkerPlan& wp = plan.value().workers[i];
      if (wp.batch < req.workers[i].min_batch || wp.batch > req.workers[i].max_batch ||
          wp.local + wp.remote != wp.batch) {
        return InvalidArgument(fmt::format("{} iteration {}: worker {} batch {} out of bounds", policy.name(),
                                           it, wp.node, wp.batch));
      }
      sum += wp.batch;
      used[wp.node] += wp.local;
      for (auto [peer, count] : wp.remote_from) {
        if (peer == wp.node)
          return InvalidArgument(fmt::format("iteration {}: worker reads from itself", it));
        used[peer] += count;
      }
    }
    if (sum != req.global_batch) return InvalidArgument(fmt::format("iteration {}: Σ batch {}", it, sum));
    if (check) {
      std::vector<int64_t> drains;
      for (const WorkerInput& w : req.workers) drains.push_back(used[w.node]);
      auto lp = FixedDrainBoundMs(req, drains);
      if (!lp.ok()) return lp.status();
      const double m = plan.value().makespan_ms;
      run.worst_vs_fixed_drain = std::max(run.worst_vs_fixed_drain, m / lp.value());
      if (m <= std::max(1.02 * lp.value(), lp.value() + OneSampleSlack(req)) + 1e-9)
        ++run.balanced_iterations;
    }
    for (WorkerInput& w : req.workers) {
      w.local_available -= used[w.node];
      if (w.local_available < 0)
        return InvalidArgument(fmt::format("iteration {}: node {} over-drained", it, w.node));
    }
    req.unconsumed_in_epoch -= req.global_batch;
    req.iteration += 1;
    for (WorkerInput& w : req.workers) {
      if (w.exclusive_available >= 0) w.exclusive_available = w.local_available;
    }
    run.times.push_back(plan.value().makespan_ms);
    if (keep_plans) run.plans.push_back(plan.value());
  }
  for (double t : run.times) run.mean += t;
  run.mean /= static_cast<double>(std::max<int64_t>(k, 1));
  const size_t tail = std::max<size_t>(1, run.times.size() / 10);
  for (size_t i = run.times.size() - tail; i < run.times.size(); ++i) run.last_decile += run.times[i];
  run.last_decile /= static_cast<double>(tail);
  return run;
}

// RandomInstance(seed, opt) with exactly `iterations` × B samples placed
// (zipf shares kept), at the start of an epoch.
inline PlanRequest EpochInstance(uint64_t seed, const InstanceOptions& opt, int64_t iterations) {
  PlanRequest req = RandomInstance(seed, opt);
  req.iterations_left_in_epoch = iterations;
  int64_t total = 0;
  for (const WorkerInput& w : req.workers) total += w.local_available;
  const int64_t want = iterations * req.global_batch;
  int64_t placed = 0;
  for (WorkerInput& w : req.workers) {
    w.local_available = w.local_available * want / total;
    placed += w.local_available;
  }
  req.workers[0].local_available += want - placed;
  req.unconsumed_in_epoch = want;
  return req;
}

// bench/planner_bench's latency instance: RandomInstance(seed) with exactly
// n workers (class "both", zipf exponent up to max_skew), rescaled to
// global batch b (pools scaled by b / B, max_batch = b, unconsumed = the
// pools' sum, at least b).
inline PlanRequest PlannerBenchInstance(int n, int64_t b, uint64_t seed, double max_skew = 1.5) {
  InstanceOptions opt;
  opt.min_workers = n;
  opt.max_workers = n;
  opt.max_skew = max_skew;
  opt.heterogeneity = Heterogeneity::kBoth;
  PlanRequest req = RandomInstance(seed, opt);
  const double f = static_cast<double>(b) / static_cast<double>(req.global_batch);
  req.global_batch = b;
  int64_t placed = 0;
  for (auto& w : req.workers) {
    w.local_available = static_cast<int64_t>(static_cast<double>(w.local_available) * f);
    w.max_batch = b;
    placed += w.local_available;
  }
  req.unconsumed_in_epoch = std::max(placed, b);
  req.workers[0].local_available += req.unconsumed_in_epoch - placed;
  return req;
}

// Instance `seed` of the epoch suite (bench/epoch_quality_bench): the
// quality suite's options (class seed % 3, overlap every other triple) at
// the start of an epoch with RandomInstance's own iterations_left.
inline PlanRequest EpochSuiteInstance(uint64_t seed, int max_workers = 256) {
  InstanceOptions opt;
  opt.max_workers = max_workers;
  opt.heterogeneity = static_cast<Heterogeneity>(seed % 3);
  opt.overlap = (seed / 3) % 2 == 1;
  return EpochInstance(seed, opt, RandomInstance(seed, opt).iterations_left_in_epoch);
}

}  // namespace loft::sched::testing
