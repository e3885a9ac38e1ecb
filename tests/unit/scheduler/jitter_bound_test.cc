// bound-epoch under compute jitter (scheduler/jitter_bound.h): argument
// checks, both estimates without jitter against bound-epoch, validity
// against loft-epoch's own plans under jitter, and that the SAA bound sees
// the expected maximum of many jittered workers.
#include "scheduler/jitter_bound.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <vector>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/epoch_runs.h"
#include "scheduler/testing/jitter_runs.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

PlanRequest SmallEpoch(uint64_t seed, bool overlap) {
  testing::InstanceOptions opt;
  opt.min_workers = 3;
  opt.max_workers = 12;
  opt.overlap = overlap;
  opt.heterogeneity = static_cast<testing::Heterogeneity>(seed % 3);
  return testing::EpochInstance(seed, opt, 6);
}

TEST_CASE("jitter bounds reject bad arguments", "[bound][jitter]") {
  const PlanRequest req = SmallEpoch(1, true);
  std::vector<double> wrong(req.workers.size() + 1, 0.05), negative(req.workers.size(), 0.05),
      ok(req.workers.size(), 0.05);
  negative[0] = -0.1;
  CHECK(EpochJitterBoundMs(req, wrong, 4, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(EpochJitterBoundMs(req, negative, 4, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(EpochJitterBoundMs(req, ok, 0, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(EpochJitterSaaBoundMs(req, wrong, 4, 2, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(EpochJitterSaaBoundMs(req, negative, 4, 2, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(EpochJitterSaaBoundMs(req, ok, 4, 0, 1).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("without jitter the bounds are bound-epoch and a relaxation of it", "[bound][jitter]") {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const PlanRequest req = SmallEpoch(seed, seed % 2 == 0);
    const std::vector<double> zero(req.workers.size(), 0.0);
    auto epoch = EpochBoundMs(req);
    auto per_draw = EpochJitterBoundMs(req, zero, 3, seed);
    auto saa = EpochJitterSaaBoundMs(req, zero, 2, 2, seed);
    REQUIRE(epoch.ok());
    REQUIRE(per_draw.ok());
    REQUIRE(saa.ok());
    CHECK(per_draw->mean_ms == Approx(*epoch).epsilon(1e-12));
    CHECK(per_draw->stderr_ms == Approx(0).margin(1e-12));
    CHECK(saa->mean_ms <= *epoch * (1 + 1e-6));
    CHECK(saa->mean_ms > 0);
  }
}

TEST_CASE("jitter bounds stay below loft-epoch's expected iteration time under jitter", "[bound][jitter]") {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const PlanRequest req = SmallEpoch(seed, seed % 2 == 1);
    const std::vector<double> sigma(req.workers.size(), 0.15);
    auto policy = MakePolicy("loft-epoch").value();
    auto run = testing::DriveEpoch(*policy, req, /*check=*/false, /*keep_plans=*/true);
    REQUIRE(run.ok());
    uint64_t rng = seed;
    double expected = 0;
    for (const Plan& plan : run->plans)
      expected += testing::ExpectedJitteredMakespanMs(req, plan, sigma, 2000, rng);
    expected /= static_cast<double>(run->plans.size());
    auto per_draw = EpochJitterBoundMs(req, sigma, 64, seed);
    auto saa = EpochJitterSaaBoundMs(req, sigma, 32, 4, seed);
    REQUIRE(per_draw.ok());
    REQUIRE(saa.ok());
    // Valid in expectation: allow the Monte Carlo error of both sides (≤ 1 %).
    CHECK(per_draw->mean_ms <= expected * 1.01);
    CHECK(saa->mean_ms <= expected * 1.01);
    ++checked;
  }
  CHECK(checked == 10);
}

TEST_CASE("the SAA bound sees the slowest of many jittered workers", "[bound][jitter]") {
  // 256 identical compute-bound workers, every one must compute (min_batch
  // 1): with σ = 5 % an iteration ends with the slowest of 256 jittered
  // fixed costs (E[max of 256 N(0,1)] ≈ 2.8, +14 % on the fixed cost),
  // whatever the plan.
  PlanRequest req;
  req.global_batch = 256 * 8;
  req.overlap = true;
  for (int i = 0; i < 256; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 2;
    w.cost.compute_per_sample_ms = 0.01;
    w.cost.local_per_sample_ms = 0.001;
    w.cost.remote_fixed_ms = 5;
    w.cost.remote_per_sample_ms = 0.01;
    w.cost.uplink_per_sample_ms = 0.05;
    w.min_batch = 1;
    w.max_batch = 1000;
    w.local_available = 8 * 4;
    req.workers.push_back(w);
  }
  req.iterations_left_in_epoch = 4;
  req.unconsumed_in_epoch = 256 * 8 * 4;
  const std::vector<double> sigma(req.workers.size(), 0.05);
  auto epoch = EpochBoundMs(req);
  auto saa = EpochJitterSaaBoundMs(req, sigma, 16, 2, 3);
  REQUIRE(epoch.ok());
  REQUIRE(saa.ok());
  CHECK(*epoch == Approx(2.08).epsilon(1e-6));
  CHECK(saa->mean_ms > *epoch * 1.12);
  // And no plan does better: the balanced plan's expectation is within 1 % of it.
  auto policy = MakePolicy("loft-epoch").value();
  auto plan = policy->PlanIteration(req);
  REQUIRE(plan.ok());
  uint64_t rng = 7;
  const double expected = testing::ExpectedJitteredMakespanMs(req, *plan, sigma, 400, rng);
  CHECK(saa->mean_ms <= expected * 1.005);
  CHECK(saa->mean_ms >= expected * 0.99);
}

}  // namespace
}  // namespace loft::sched
