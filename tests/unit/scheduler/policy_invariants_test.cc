// Invariants of every policy (Σ = B, bounds, local ≤ available,
// remote_from sums) and each policy's own rule.
#include <catch2/catch.hpp>
#include <map>
#include <numeric>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/policies/apportion.h"
#include "scheduler/policies/lbbsp.h"
#include "scheduler/policies/pid.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

CostParams Cost(double c0, double c1, double l1, double a, double rr, double u) {
  CostParams c;
  c.compute_fixed_ms = c0;
  c.compute_per_sample_ms = c1;
  c.local_per_sample_ms = l1;
  c.remote_fixed_ms = a;
  c.remote_per_sample_ms = rr;
  c.uplink_per_sample_ms = u;
  return c;
}

PlanRequest Simple(int n, int64_t b, int64_t avail, bool overlap = false) {
  PlanRequest req;
  req.global_batch = b;
  req.overlap = overlap;
  req.unconsumed_in_epoch = avail * n;
  for (int i = 0; i < n; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost = Cost(1, 0.05, 0.01, 1, 0.06, 0.06);
    w.min_batch = 1;
    w.max_batch = b;
    w.local_available = avail;
    req.workers.push_back(w);
  }
  return req;
}

void CheckInvariants(const PlanRequest& req, const Plan& p, bool locality) {
  REQUIRE(p.workers.size() == req.workers.size());
  int64_t sum = 0;
  std::map<int32_t, int64_t> served;
  for (size_t i = 0; i < p.workers.size(); ++i) {
    const WorkerPlan& wp = p.workers[i];
    CHECK(wp.node == req.workers[i].node);
    CHECK(wp.batch >= req.workers[i].min_batch);
    CHECK(wp.batch <= req.workers[i].max_batch);
    CHECK(wp.local + wp.remote == wp.batch);
    CHECK(wp.local >= 0);
    CHECK(wp.remote >= 0);
    CHECK(wp.predicted_ms <= p.makespan_ms + 1e-9);
    sum += wp.batch;
    if (locality) {
      CHECK(wp.local <= req.workers[i].local_available);
      int64_t from = 0;
      for (auto [peer, count] : wp.remote_from) {
        CHECK(peer != wp.node);
        CHECK(count > 0);
        from += count;
        served[peer] += count;
      }
      CHECK(from == wp.remote);
    } else {
      CHECK(wp.remote_from.empty());
    }
  }
  CHECK(sum == req.global_batch);
  if (locality) {
    for (size_t j = 0; j < req.workers.size(); ++j) {
      CHECK(p.workers[j].local + served[req.workers[j].node] <= req.workers[j].local_available);
    }
  }
}

TEST_CASE("every policy keeps the plan invariants on random instances", "[policy]") {
  for (uint64_t seed = 0; seed < 60; ++seed) {
    testing::InstanceOptions opt;
    opt.max_workers = 64;
    opt.overlap = seed % 2 == 1;
    opt.heterogeneity = static_cast<testing::Heterogeneity>(seed % 3);
    const PlanRequest req = testing::RandomInstance(seed + 1000, opt);
    for (const char* name : {"uniform", "lbbsp", "pid", "loft"}) {
      INFO("seed " << seed << " policy " << name);
      auto policy = MakePolicy(name);
      REQUIRE(policy.ok());
      auto plan = policy.value()->PlanIteration(req);
      REQUIRE(plan.ok());
      CHECK(plan.value().policy == name);
      CheckInvariants(req, plan.value(), policy.value()->locality_aware());
    }
  }
}

TEST_CASE("infeasible requests get a clear InvalidArgument", "[policy]") {
  PlanRequest req = Simple(4, 100, 1000);
  for (auto& w : req.workers) w.max_batch = 20;  // Σ max = 80 < 100
  for (const char* name : {"uniform", "lbbsp", "pid", "loft"}) {
    auto policy = MakePolicy(name);
    REQUIRE(policy.ok());
    auto plan = policy.value()->PlanIteration(req);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().code() == StatusCode::kInvalidArgument);
    CHECK(plan.status().message().find("max_batch") != std::string::npos);
  }
  PlanRequest mins = Simple(4, 10, 1000);
  for (auto& w : mins.workers) w.min_batch = 5;
  auto plan = MakePolicy("loft").value()->PlanIteration(mins);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find("min_batch") != std::string::npos);
  CHECK(MakePolicy("nope").status().code() == StatusCode::kInvalidArgument);
  CHECK(MakePolicy("loft-epoch").ok());
  CHECK_FALSE(LowerBoundMs(req).ok());
}

TEST_CASE("uniform spreads the remainder over the first workers", "[policy][uniform]") {
  const PlanRequest req = Simple(4, 10, 1000);
  auto plan = MakePolicy("uniform").value()->PlanIteration(req);
  REQUIRE(plan.ok());
  std::vector<int64_t> sizes;
  for (const auto& wp : plan.value().workers) sizes.push_back(wp.batch);
  CHECK(sizes == std::vector<int64_t>{3, 3, 2, 2});
}

TEST_CASE("Apportion respects clamps and sums exactly", "[policy]") {
  const std::vector<double> w{1, 1, 8};
  const std::vector<int64_t> mins{2, 0, 0}, maxs{100, 100, 50};
  auto out = Apportion(w, mins, maxs, 100);
  REQUIRE(out.ok());
  CHECK(out.value()[2] == 50);
  CHECK(out.value()[0] + out.value()[1] + out.value()[2] == 100);
  CHECK(out.value()[0] == 25);
  CHECK_FALSE(Apportion(w, mins, maxs, 300).ok());
}

TEST_CASE("lbbsp sizes follow compute throughput, then the observed EWMA", "[policy][lbbsp]") {
  PlanRequest req = Simple(2, 300, 1000);
  req.workers[0].cost.compute_per_sample_ms = 0.1;
  req.workers[1].cost.compute_per_sample_ms = 0.05;
  req.workers[1].cost.remote_per_sample_ms = 10;  // lbbsp ignores reading costs
  LbBspPolicy lb;
  auto plan = lb.PlanIteration(req);
  REQUIRE(plan.ok());
  CHECK(plan.value().workers[0].batch == 100);
  CHECK(plan.value().workers[1].batch == 200);
  // Observed: node 0 computes 100 samples in 10 ms, node 1 100 in 10 ms.
  std::vector<Observation> obs(2);
  obs[0].node = 0, obs[0].batch = 100, obs[0].compute_ms = 10;
  obs[1].node = 1, obs[1].batch = 200, obs[1].compute_ms = 20;
  lb.Observe(obs);
  CHECK(lb.throughput(0) == Approx(10.0));
  auto plan2 = lb.PlanIteration(req);
  REQUIRE(plan2.ok());
  CHECK(plan2.value().workers[0].batch == 150);
  CHECK(plan2.value().workers[1].batch == 150);
  CHECK_FALSE(lb.locality_aware());
}

TEST_CASE("pid starts uniform, applies the law outside the dead band", "[policy][pid]") {
  const PlanRequest req = Simple(3, 300, 1000);
  PidPolicy pid;
  auto p1 = pid.PlanIteration(req);
  REQUIRE(p1.ok());
  for (const auto& wp : p1.value().workers) CHECK(wp.batch == 100);
  // Within the dead band (mean 100, all within 20 %): no change.
  std::vector<Observation> obs(3);
  for (int i = 0; i < 3; ++i) obs[i].node = i;
  obs[0].iteration_ms = 90, obs[1].iteration_ms = 100, obs[2].iteration_ms = 110;
  pid.Observe(obs);
  auto p2 = pid.PlanIteration(req);
  REQUIRE(p2.ok());
  for (const auto& wp : p2.value().workers) CHECK(wp.batch == 100);
  // Worker 2 twice as slow as the others: t̄ = 80, worker 2 → 100·80/120 =
  // 66.7, workers 0, 1 at |60−80|/80 = 0.25 > 0.2 → 100·80/60 = 133.3;
  // renormalised to 300: 300·(133.3, 133.3, 66.7)/333.3 = (120, 120, 60).
  obs[0].iteration_ms = 60, obs[1].iteration_ms = 60, obs[2].iteration_ms = 120;
  pid.Observe(obs);
  auto p3 = pid.PlanIteration(req);
  REQUIRE(p3.ok());
  CHECK(p3.value().workers[0].batch == 120);
  CHECK(p3.value().workers[1].batch == 120);
  CHECK(p3.value().workers[2].batch == 60);
}

TEST_CASE("loft reads locally when it can and balances the makespan", "[policy][loft]") {
  // Two workers, identical but one holds no samples: it must read remotely
  // from the other, within the other's uplink.
  PlanRequest req = Simple(2, 200, 0);
  req.workers[0].local_available = 1000;
  req.unconsumed_in_epoch = 1000;
  auto plan = MakePolicy("loft").value()->PlanIteration(req);
  REQUIRE(plan.ok());
  const Plan& p = plan.value();
  CheckInvariants(req, p, true);
  CHECK(p.workers[0].remote == 0);
  CHECK(p.workers[1].local == 0);
  REQUIRE(p.workers[1].remote_from.size() == 1);
  CHECK(p.workers[1].remote_from[0].first == 0);
  // Worker 1 pays remote reads (0.06/sample + 1 ms) instead of local ones
  // (0.01/sample), so it takes fewer samples; times within one sample.
  CHECK(p.workers[1].batch < p.workers[0].batch);
  CHECK(std::abs(p.workers[0].predicted_ms - p.workers[1].predicted_ms) < 0.12);
  auto bound = LowerBoundMs(req);
  REQUIRE(bound.ok());
  CHECK(bound.value() <= p.makespan_ms);
  CHECK(p.makespan_ms <= bound.value() + 0.12);
}

TEST_CASE("loft works in both overlap modes and beats uniform on skewed placements", "[policy][loft]") {
  for (bool overlap : {false, true}) {
    PlanRequest req = Simple(8, 800, 0, overlap);
    req.workers[0].local_available = 4000;  // everything on one node
    req.workers[0].cost.uplink_per_sample_ms = 0.005;
    req.unconsumed_in_epoch = 4000;
    auto loft = MakePolicy("loft").value()->PlanIteration(req);
    auto uni = MakePolicy("uniform").value()->PlanIteration(req);
    REQUIRE(loft.ok());
    REQUIRE(uni.ok());
    CheckInvariants(req, loft.value(), true);
    CHECK(loft.value().makespan_ms < uni.value().makespan_ms);
    CHECK(loft.value().workers[0].batch > 100);
  }
}

TEST_CASE("EvaluateShuffle expects local_available / unconsumed locality", "[policy]") {
  PlanRequest req = Simple(2, 100, 500);
  req.unconsumed_in_epoch = 2000;  // half of the epoch is on dead nodes
  Plan p;
  p.workers.resize(2);
  p.workers[0].batch = 40;
  p.workers[1].batch = 60;
  const Plan e = EvaluateShuffle(req, p);
  CHECK(e.workers[0].local == 10);
  CHECK(e.workers[0].remote == 30);
  CHECK(e.workers[1].local == 15);
  CHECK(e.workers[1].remote == 45);
  // Worker 0 reads 30 remote samples from worker 1 and vice versa: uplink
  // 45·0.06 = 2.7 ms < its own time, so times follow the formula.
  const double t0 = PredictMsWithUplink(req.workers[0].cost, 10, 30, 0, false);
  CHECK(e.workers[0].predicted_ms == Approx(t0));
  CHECK(e.makespan_ms == Approx(std::max(e.workers[0].predicted_ms, e.workers[1].predicted_ms)));
}

}  // namespace
}  // namespace loft::sched

namespace loft::sched {
TEST_CASE("locality plans do not depend on how sparse the node ids are", "[policy]") {
  // The C API lets callers number workers freely; EvaluateLocalityPlan and
  // loft-epoch map node ids to workers without assuming dense ids.
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    testing::InstanceOptions opt;
    opt.heterogeneity = testing::Heterogeneity::kBoth;
    const PlanRequest dense = testing::RandomInstance(seed, opt);
    PlanRequest sparse = dense;
    for (auto& w : sparse.workers) w.node = 1000003 * w.node + 7;
    for (const char* name : {"loft", "loft-epoch"}) {
      auto a = MakePolicy(name).value()->PlanIteration(dense);
      auto b = MakePolicy(name).value()->PlanIteration(sparse);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      CHECK(a->makespan_ms == Approx(b->makespan_ms).epsilon(1e-12));
      REQUIRE(a->workers.size() == b->workers.size());
      for (size_t i = 0; i < a->workers.size(); ++i) {
        CHECK(a->workers[i].batch == b->workers[i].batch);
        CHECK(a->workers[i].local == b->workers[i].local);
        CHECK(a->workers[i].predicted_ms == Approx(b->workers[i].predicted_ms).epsilon(1e-12));
        REQUIRE(a->workers[i].remote_from.size() == b->workers[i].remote_from.size());
        for (size_t k = 0; k < a->workers[i].remote_from.size(); ++k) {
          CHECK(1000003 * a->workers[i].remote_from[k].first + 7 == b->workers[i].remote_from[k].first);
        }
      }
    }
  }
}
}  // namespace loft::sched
