// The lower bound: exact on instances with a closed form, never above any
// policy's makespan, monotone in B, and clear errors.
#include "scheduler/bound.h"

#include <catch2/catch.hpp>

#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

PlanRequest ComputeOnly(const std::vector<double>& c1, int64_t b) {
  PlanRequest req;
  req.global_batch = b;
  req.unconsumed_in_epoch = b * 10 * static_cast<int64_t>(c1.size());
  for (size_t i = 0; i < c1.size(); ++i) {
    WorkerInput w;
    w.node = static_cast<int32_t>(i);
    w.cost.compute_fixed_ms = 2;
    w.cost.compute_per_sample_ms = c1[i];
    w.max_batch = b;
    w.local_available = b * 10;
    req.workers.push_back(w);
  }
  return req;
}

TEST_CASE("bound equals the closed form when only compute matters", "[bound]") {
  // T = c0 + B / Σ(1/c1): local data everywhere, free reads.
  const PlanRequest req = ComputeOnly({0.1, 0.05, 0.025}, 700);
  auto b = LowerBoundMs(req);
  REQUIRE(b.ok());
  CHECK(b.value() == Approx(2 + 700.0 / (10 + 20 + 40)).epsilon(1e-6));
}

TEST_CASE("bound accounts for uplink capacity", "[bound]") {
  // Worker 1 has no data; worker 0's uplink serves at 1 ms/sample, free
  // compute and reads otherwise: r ≤ T, l ≤ anything, so the bound is set
  // by compute: c1 = 0.01, c0 = 0 → worker 0 alone takes B in 0.01·B ms
  // unless the uplink helps. Σ b = l0 + r1 with r1 ≤ T (uplink) and
  // 0.01·l0 ≤ T, 0.01·r1 ≤ T: B = 100·T + T → T = B/101.
  PlanRequest req;
  req.global_batch = 1010;
  req.overlap = true;
  for (int i = 0; i < 2; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_per_sample_ms = 0.01;
    w.cost.uplink_per_sample_ms = 1.0;
    w.max_batch = 1010;
    w.local_available = i == 0 ? 5000 : 0;
    req.workers.push_back(w);
  }
  req.unconsumed_in_epoch = 5000;
  auto b = LowerBoundMs(req);
  REQUIRE(b.ok());
  CHECK(b.value() == Approx(10.0).epsilon(1e-5));
}

TEST_CASE("bound is monotone in B and below every policy", "[bound]") {
  for (uint64_t seed = 0; seed < 30; ++seed) {
    testing::InstanceOptions opt;
    opt.max_workers = 32;
    opt.overlap = seed % 2 == 0;
    PlanRequest req = testing::RandomInstance(seed + 77, opt);
    auto b1 = LowerBoundMs(req);
    REQUIRE(b1.ok());
    for (const char* name : {"uniform", "lbbsp", "pid", "loft"}) {
      auto p = MakePolicy(name).value()->PlanIteration(req);
      REQUIRE(p.ok());
      CHECK(b1.value() <= p.value().makespan_ms * (1 + 1e-9));
    }
    req.global_batch = req.global_batch * 2;
    req.workers[0].max_batch += req.global_batch;
    auto b2 = LowerBoundMs(req);
    REQUIRE(b2.ok());
    CHECK(b2.value() >= b1.value());
  }
}

TEST_CASE("bound rejects requests that cannot be satisfied", "[bound]") {
  PlanRequest req = ComputeOnly({0.1, 0.1}, 100);
  req.workers[0].local_available = 10;
  req.workers[1].local_available = 10;
  auto b = LowerBoundMs(req);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == StatusCode::kFailedPrecondition);
  req.global_batch = 0;
  CHECK(LowerBoundMs(req).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loft::sched
