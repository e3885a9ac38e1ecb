// The fixed-drain local search of loft-epoch (policies/drain_search.h):
// keeps every node's drain, Σ batch and the batch bounds, and removes the
// imbalance of a plan that leaves all reading to the node holding the data.
#include "scheduler/policies/drain_search.h"

#include <catch2/catch.hpp>
#include <map>

#include "scheduler/plan.h"

namespace loft::sched {
namespace {

PlanRequest ThreeWorkers() {
  PlanRequest req;
  req.global_batch = 300;
  for (int i = 0; i < 3; ++i) {
    WorkerInput w;
    w.node = 10 + i;  // ids need not be dense
    w.cost.compute_fixed_ms = 1;
    w.cost.compute_per_sample_ms = 0.05;
    w.cost.local_per_sample_ms = 0.01;
    w.cost.remote_fixed_ms = 0.5;
    w.cost.remote_per_sample_ms = 0.02;
    w.cost.uplink_per_sample_ms = 0.02;
    w.min_batch = 1;
    w.max_batch = 300;
    w.local_available = i == 0 ? 300 : 0;
    req.workers.push_back(w);
  }
  return req;
}

std::map<int32_t, int64_t> Drains(const Plan& plan) {
  std::map<int32_t, int64_t> d;
  for (const WorkerPlan& wp : plan.workers) {
    d[wp.node] += wp.local;
    for (auto [peer, count] : wp.remote_from) d[peer] += count;
  }
  return d;
}

TEST_CASE("drain search balances a fixed-drain plan and keeps its drains", "[policy][loft-epoch]") {
  const PlanRequest req = ThreeWorkers();
  // Everything on node 10, which also reads it all except each other
  // worker's min_batch.
  Plan plan;
  plan.workers = {WorkerPlan{10, 298, 298, 0, {}, 0, {}}, WorkerPlan{11, 1, 0, 1, {{10, 1}}, 0, {}},
                  WorkerPlan{12, 1, 0, 1, {{10, 1}}, 0, {}}};
  EvaluateLocalityPlan(req, plan);
  const double before = plan.makespan_ms;
  const auto drains = Drains(plan);
  ImproveFixedDrainPlan(req, plan);
  // Balanced: each of the three reads ~100 (node 10 locally at 0.06 ms, the
  // others remotely at 0.07 ms plus the latency, node 10's uplink ~4 ms).
  CHECK(plan.makespan_ms < 0.45 * before);
  CHECK(plan.makespan_ms <= 1.0 + 0.5 + 0.07 * 100 + 0.07);
  CHECK(Drains(plan) == drains);
  int64_t sum = 0;
  for (const WorkerPlan& wp : plan.workers) {
    CHECK(wp.batch == wp.local + wp.remote);
    CHECK(wp.batch >= 1);
    if (wp.node != 10) CHECK(wp.local == 0);
    sum += wp.batch;
  }
  CHECK(sum == 300);
}

TEST_CASE("drain search respects max_batch and never raises the makespan", "[policy][loft-epoch]") {
  PlanRequest req = ThreeWorkers();
  req.workers[1].max_batch = 5;
  req.workers[2].max_batch = 5;
  Plan plan;
  plan.workers = {WorkerPlan{10, 298, 298, 0, {}, 0, {}}, WorkerPlan{11, 1, 0, 1, {{10, 1}}, 0, {}},
                  WorkerPlan{12, 1, 0, 1, {{10, 1}}, 0, {}}};
  EvaluateLocalityPlan(req, plan);
  const double before = plan.makespan_ms;
  ImproveFixedDrainPlan(req, plan);
  CHECK(plan.makespan_ms <= before);
  CHECK(plan.workers[1].batch <= 5);
  CHECK(plan.workers[2].batch <= 5);
  CHECK(plan.workers[0].batch + plan.workers[1].batch + plan.workers[2].batch == 300);
}

}  // namespace
}  // namespace loft::sched
