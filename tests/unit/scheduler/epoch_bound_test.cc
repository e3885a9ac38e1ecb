// bound-epoch (EpochBoundMs): argument checks, its relation to the
// per-iteration LowerBoundMs, and that greedy loft driven through whole
// epochs never averages below it.
#include <catch2/catch.hpp>
#include <cstdio>
#include <vector>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

testing::InstanceOptions SmallOptions() {
  testing::InstanceOptions opt;
  opt.min_workers = 3;
  opt.max_workers = 10;
  return opt;
}

TEST_CASE("EpochBoundMs rejects bad arguments", "[bound][epoch]") {
  PlanRequest req = testing::RandomInstance(1, SmallOptions());
  std::vector<int64_t> wrong(req.workers.size() + 1, 10);
  CHECK(EpochBoundMs(req, wrong).status().code() == StatusCode::kInvalidArgument);
  std::vector<int64_t> negative(req.workers.size(), 10);
  negative[0] = -1;
  CHECK(EpochBoundMs(req, negative).status().code() == StatusCode::kInvalidArgument);
  std::vector<int64_t> few(req.workers.size(), 0);
  CHECK(EpochBoundMs(req, few).status().code() == StatusCode::kFailedPrecondition);
  req.global_batch = 0;
  CHECK(EpochBoundMs(req).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("EpochBoundMs is at least the per-iteration bound and grows with skew", "[bound][epoch]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    for (bool overlap : {false, true}) {
      testing::InstanceOptions opt = SmallOptions();
      opt.overlap = overlap;
      const PlanRequest req = testing::RandomInstance(seed, opt);
      auto greedy = LowerBoundMs(req);
      auto epoch = EpochBoundMs(req);
      REQUIRE(greedy.ok());
      REQUIRE(epoch.ok());
      CHECK(epoch.value() >= greedy.value() * (1 - 1e-6));
      // Explicit per-node counts equal to local_available give the same bound.
      std::vector<int64_t> h;
      for (const WorkerInput& w : req.workers) h.push_back(w.local_available);
      CHECK(EpochBoundMs(req, h).value() == Approx(epoch.value()));
    }
  }
  // Two identical workers; all samples on worker 0 forces part of the
  // batch through worker 0's uplink, an even placement does not.
  PlanRequest req;
  req.global_batch = 200;
  for (int i = 0; i < 2; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 1;
    w.cost.compute_per_sample_ms = 0.02;
    w.cost.local_per_sample_ms = 0.01;
    w.cost.remote_fixed_ms = 1;
    w.cost.remote_per_sample_ms = 0.05;
    w.cost.uplink_per_sample_ms = 0.1;
    w.max_batch = 200;
    w.local_available = 1000;
    req.workers.push_back(w);
  }
  const double even = EpochBoundMs(req).value();
  const std::vector<int64_t> skewed{2000, 0};
  const double one_sided = EpochBoundMs(req, skewed).value();
  CHECK(even == Approx(1 + 100 * 0.03).epsilon(0.01));
  // Stationary optimum: worker 1 reads r from worker 0, T = max(0.1·r,
  // 2 + 0.07·r, 1 + 0.03·(200 − r)) = 5.5 at r = 50; the bound is below it
  // and well above the even placement's.
  CHECK(one_sided <= 5.5 + 1e-6);
  CHECK(one_sided > 1.3 * even);
}

TEST_CASE("EpochBoundMs lets either holder drain a replicated sample", "[bound][epoch]") {
  // Two identical workers, 2000 distinct samples: node 0 holds all of them
  // (1000 only it has), node 1 holds the other 1000 too (replicas).
  PlanRequest req;
  req.global_batch = 200;
  req.unconsumed_in_epoch = 2000;
  for (int i = 0; i < 2; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 1;
    w.cost.compute_per_sample_ms = 0.02;
    w.cost.local_per_sample_ms = 0.01;
    w.cost.remote_fixed_ms = 1;
    w.cost.remote_per_sample_ms = 0.05;
    w.cost.uplink_per_sample_ms = 0.1;
    w.max_batch = 200;
    req.workers.push_back(w);
  }
  req.workers[0].local_available = 2000;
  req.workers[0].exclusive_available = 1000;
  req.workers[1].local_available = 1000;
  req.workers[1].exclusive_available = 0;
  // Node 0 drains its 1000 exclusive samples at 100 per iteration, node 1
  // the shared ones: both read 100 locally, T = 1 + 100·0.03.
  const double shared = EpochBoundMs(req).value();
  CHECK(shared == Approx(4.0).epsilon(1e-4));
  // Unknown exclusivity: at least H_j − (ΣH − U) is exclusive — the same here.
  req.workers[0].exclusive_available = -1;
  req.workers[1].exclusive_available = -1;
  CHECK(EpochBoundMs(req).value() == Approx(shared).epsilon(1e-6));
  // Claimed all-exclusive (as if 3000 distinct samples): node 0 must drain
  // two thirds, node 1 reads some of them through node 0's uplink.
  const std::vector<int64_t> exclusive{2000, 1000};
  CHECK(EpochBoundMs(req, exclusive).value() > 1.05 * shared);
  req.workers[1].exclusive_available = 1001;
  CHECK(EpochBoundMs(req).status().code() == StatusCode::kInvalidArgument);
}

// Drives a policy through the rest of an epoch (no replication: each plan
// consumes local from the worker and remote_from counts from the peers) and
// returns its mean predicted makespan.
double DriveEpoch(Policy& policy, PlanRequest req) {
  double sum = 0;
  const int64_t k = req.iterations_left_in_epoch;
  for (int64_t it = 0; it < k; ++it) {
    req.iterations_left_in_epoch = k - it;
    auto plan = policy.PlanIteration(req);
    REQUIRE(plan.ok());
    sum += plan.value().makespan_ms;
    for (size_t i = 0; i < req.workers.size(); ++i) {
      const WorkerPlan& wp = plan.value().workers[i];
      req.workers[i].local_available -= wp.local;
      for (auto [peer, count] : wp.remote_from) {
        for (WorkerInput& w : req.workers) {
          if (w.node == peer) w.local_available -= count;
        }
      }
    }
    for (const WorkerInput& w : req.workers) REQUIRE(w.local_available >= 0);
    req.unconsumed_in_epoch -= req.global_batch;
  }
  for (const WorkerInput& w : req.workers) CHECK(w.local_available == 0);
  return sum / static_cast<double>(k);
}

TEST_CASE("loft's epoch mean never beats the epoch bound", "[bound][epoch][loft]") {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    testing::InstanceOptions opt = SmallOptions();
    opt.overlap = seed % 2 == 0;
    const PlanRequest req = testing::RandomInstance(seed, opt);
    const double bound = EpochBoundMs(req).value();
    auto loft = MakePolicy("loft").value();
    const double mean = DriveEpoch(*loft, req);
    INFO("seed " << seed << " loft mean " << mean << " epoch bound " << bound);
    CHECK(mean >= bound * (1 - 1e-3));
  }
}

}  // namespace
}  // namespace loft::sched
