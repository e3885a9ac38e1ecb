// Regression: loft must return a valid plan for every feasible request
// (Σ min ≤ B ≤ Σ max, B ≤ Σ local_available), including a tight pool near
// an epoch's end where some workers have to give cached samples to peers.
#include <catch2/catch.hpp>
#include <map>

#include "core/placement.h"
#include "scheduler/plan.h"

namespace loft::sched {
namespace {

CostParams Cost(double c1, double l1, double rr, double u) {
  CostParams c;
  c.compute_fixed_ms = 1;
  c.compute_per_sample_ms = c1;
  c.local_per_sample_ms = l1;
  c.remote_fixed_ms = 0.5;
  c.remote_per_sample_ms = rr;
  c.uplink_per_sample_ms = u;
  return c;
}

PlanRequest Tight(std::vector<int64_t> avail, int64_t b, int64_t min_batch, bool overlap) {
  PlanRequest req;
  req.global_batch = b;
  req.overlap = overlap;
  for (size_t i = 0; i < avail.size(); ++i) {
    WorkerInput w;
    w.node = static_cast<int32_t>(i);
    w.cost = Cost(0.05 * static_cast<double>(i + 1), 0.01, 0.06, 0.08);
    w.min_batch = min_batch;
    w.max_batch = b;
    w.local_available = avail[i];
    req.unconsumed_in_epoch += avail[i];
    req.workers.push_back(w);
  }
  return req;
}

void CheckValid(const PlanRequest& req, const Plan& p) {
  REQUIRE(p.workers.size() == req.workers.size());
  int64_t sum = 0;
  std::map<int32_t, int64_t> served;
  for (size_t i = 0; i < p.workers.size(); ++i) {
    const WorkerPlan& wp = p.workers[i];
    CHECK(wp.batch >= req.workers[i].min_batch);
    CHECK(wp.batch <= req.workers[i].max_batch);
    CHECK(wp.local + wp.remote == wp.batch);
    CHECK(wp.local >= 0);
    CHECK(wp.local <= req.workers[i].local_available);
    int64_t from = 0;
    for (auto [peer, count] : wp.remote_from) {
      CHECK(peer != wp.node);
      CHECK(count > 0);
      from += count;
      served[peer] += count;
    }
    CHECK(from == wp.remote);
    sum += wp.batch;
  }
  CHECK(sum == req.global_batch);
  for (size_t j = 0; j < req.workers.size(); ++j) {
    CHECK(p.workers[j].local + served[req.workers[j].node] <= req.workers[j].local_available);
  }
}

TEST_CASE("loft plans a tight end-of-epoch pool instead of failing", "[policy][loft]") {
  for (bool overlap : {false, true}) {
    const PlanRequest req = Tight({0, 0, 0, 8, 10, 6}, 24, 2, overlap);
    auto plan = MakePolicy("loft").value()->PlanIteration(req);
    REQUIRE(plan.ok());
    CheckValid(req, plan.value());
    for (int i = 0; i < 3; ++i) CHECK(plan.value().workers[i].remote >= 2);
  }
}

TEST_CASE("loft plans when the only samples left sit on one worker's cache", "[policy][loft]") {
  for (bool overlap : {false, true}) {
    const PlanRequest req = Tight({0, 9, 0, 0}, 9, 2, overlap);
    auto plan = MakePolicy("loft").value()->PlanIteration(req);
    REQUIRE(plan.ok());
    CheckValid(req, plan.value());
    CHECK(plan.value().workers[1].local >= 2);
  }
}

TEST_CASE("loft returns a valid plan for random feasible tight pools", "[policy][loft]") {
  uint64_t st = 77;
  int planned = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + static_cast<int>(SplitMix64(st) % 7);
    std::vector<int64_t> avail(n);
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      avail[i] = SplitMix64(st) % 3 == 0 ? 0 : static_cast<int64_t>(SplitMix64(st) % 12);
      total += avail[i];
    }
    const int64_t min_batch = static_cast<int64_t>(SplitMix64(st) % 4);
    if (total < min_batch * n || total == 0) continue;
    const int64_t b = std::max<int64_t>(min_batch * n, total - static_cast<int64_t>(SplitMix64(st) % 3));
    if (b <= 0 || b > total) continue;
    PlanRequest req = Tight(avail, b, min_batch, trial % 2 == 1);
    for (WorkerInput& w : req.workers) w.max_batch = std::max<int64_t>(min_batch, b / 2 + 1);
    int64_t sum_max = 0;
    for (const WorkerInput& w : req.workers) sum_max += w.max_batch;
    if (sum_max < b) continue;
    auto plan = MakePolicy("loft").value()->PlanIteration(req);
    INFO("trial " << trial);
    REQUIRE(plan.ok());
    CheckValid(req, plan.value());
    ++planned;
  }
  CHECK(planned > 100);
}

}  // namespace
}  // namespace loft::sched
