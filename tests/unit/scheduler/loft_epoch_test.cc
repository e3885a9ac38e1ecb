// loft-epoch (LoftEpochPolicy) driven through whole epochs on random
// heterogeneous instances under the cost model: close to bound-epoch,
// never much worse than loft, no end-of-epoch cliff.
#include "scheduler/policies/loft_epoch.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <vector>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

struct EpochRun {
  double mean = 0;
  double last_decile = 0;
};

// Drives a policy through the rest of an epoch (no replication: a plan
// consumes `local` from the worker and remote_from counts from the peers),
// checking each plan's validity; predicted makespans per iteration.
EpochRun DriveEpoch(Policy& policy, PlanRequest req) {
  const int64_t k = req.iterations_left_in_epoch;
  std::vector<double> times;
  for (int64_t it = 0; it < k; ++it) {
    req.iterations_left_in_epoch = k - it;
    auto plan = policy.PlanIteration(req);
    REQUIRE(plan.ok());
    int64_t sum = 0;
    std::map<int32_t, int64_t> used;
    for (size_t i = 0; i < req.workers.size(); ++i) {
      const WorkerPlan& wp = plan.value().workers[i];
      REQUIRE(wp.batch >= req.workers[i].min_batch);
      REQUIRE(wp.batch <= req.workers[i].max_batch);
      sum += wp.batch;
      used[wp.node] += wp.local;
      for (auto [peer, count] : wp.remote_from) {
        REQUIRE(peer != wp.node);
        used[peer] += count;
      }
    }
    REQUIRE(sum == req.global_batch);
    for (WorkerInput& w : req.workers) {
      w.local_available -= used[w.node];
      REQUIRE(w.local_available >= 0);
    }
    req.unconsumed_in_epoch -= req.global_batch;
    times.push_back(plan.value().makespan_ms);
  }
  EpochRun run;
  for (double t : times) run.mean += t;
  run.mean /= static_cast<double>(k);
  const size_t tail = std::max<size_t>(1, times.size() / 10);
  for (size_t i = times.size() - tail; i < times.size(); ++i) run.last_decile += times[i];
  run.last_decile /= static_cast<double>(tail);
  return run;
}

TEST_CASE("loft-epoch stays near bound-epoch and avoids the end-of-epoch cliff", "[policy][loft-epoch]") {
  double worst = 0;
  const int instances = 24;
  for (uint64_t seed = 1; seed <= instances; ++seed) {
    testing::InstanceOptions opt;
    opt.min_workers = 3;
    opt.max_workers = 12;
    opt.overlap = seed % 2 == 0;
    PlanRequest req = testing::RandomInstance(seed, opt);
    // Exactly 20 iterations' worth of samples, keeping the zipf shares.
    req.iterations_left_in_epoch = 20;
    int64_t total = 0;
    for (const WorkerInput& w : req.workers) total += w.local_available;
    const int64_t want = 20 * req.global_batch;
    int64_t placed = 0;
    for (WorkerInput& w : req.workers) {
      w.local_available = w.local_available * want / total;
      placed += w.local_available;
    }
    req.workers[0].local_available += want - placed;
    req.unconsumed_in_epoch = want;
    const double bound = EpochBoundMs(req).value();
    LoftEpochPolicy epoch;
    auto loft = MakePolicy("loft").value();
    const EpochRun e = DriveEpoch(epoch, req);
    const EpochRun l = DriveEpoch(*loft, req);
    INFO("seed " << seed << " bound-epoch " << bound << " loft-epoch " << e.mean << " (last decile "
                 << e.last_decile << ") loft " << l.mean << " (last decile " << l.last_decile << ")");
    CHECK(e.mean >= bound * (1 - 1e-3));
    CHECK(e.mean <= 1.02 * l.mean);
    CHECK(e.last_decile <= 1.5 * e.mean);
    CHECK(e.mean <= 1.05 * bound);
    worst = std::max(worst, e.mean / bound);
  }
  WARN("loft-epoch / bound-epoch: worst " << worst << " over " << instances << " instances");
}

TEST_CASE("loft-epoch plans requests that carry exclusive counts", "[policy][loft-epoch]") {
  testing::InstanceOptions opt;
  opt.min_workers = 3;
  opt.max_workers = 12;
  PlanRequest req = testing::RandomInstance(5, opt);
  for (WorkerInput& w : req.workers) w.exclusive_available = w.local_available;
  LoftEpochPolicy policy;
  auto plan = policy.PlanIteration(req);
  REQUIRE(plan.ok());
  int64_t sum = 0;
  for (const WorkerPlan& wp : plan.value().workers) sum += wp.batch;
  CHECK(sum == req.global_batch);
  CHECK(EpochBoundMs(req).ok());
}

TEST_CASE("loft-epoch checks its input and names itself", "[policy][loft-epoch]") {
  LoftEpochPolicy policy;
  CHECK(policy.name() == "loft-epoch");
  CHECK(policy.locality_aware());
  PlanRequest req = testing::RandomInstance(3, testing::InstanceOptions{});
  req.global_batch = 0;
  CHECK(policy.PlanIteration(req).status().code() == StatusCode::kInvalidArgument);
  req = testing::RandomInstance(3, testing::InstanceOptions{});
  for (WorkerInput& w : req.workers) w.local_available = 0;
  CHECK(policy.PlanIteration(req).status().code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loft::sched
