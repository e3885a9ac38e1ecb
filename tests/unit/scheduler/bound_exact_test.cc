// The lower bound against the exact integer optimum: a brute-force search
// over every integer plan of tiny random instances (sizes, local/remote
// split, and which peer serves each remote sample) is never below
// LowerBoundMs, and loft is never below it either. Plus the case the
// aggregated-supply relaxation gets wrong: a worker cannot read remotely
// from itself, which the exact LP (≤ kExactLpMaxWorkers) enforces.
#include <catch2/catch.hpp>
#include <limits>
#include <vector>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched {
namespace {

// Minimum makespan over every integer plan (EvaluateLocalityPlan).
class BruteForce {
 public:
  explicit BruteForce(const PlanRequest& req) : req_(req), n_(req.workers.size()) {
    plan_.workers.resize(n_);
    for (size_t i = 0; i < n_; ++i) plan_.workers[i].node = req.workers[i].node;
    left_.resize(n_);
    for (size_t i = 0; i < n_; ++i) left_[i] = req.workers[i].local_available;
  }
  double Run() {
    Sizes(0, req_.global_batch);
    return best_;
  }

 private:
  // Batch sizes for workers i.. summing to `rest`.
  void Sizes(size_t i, int64_t rest) {
    if (i == n_) {
      if (rest == 0) Split(0);
      return;
    }
    const WorkerInput& w = req_.workers[i];
    for (int64_t b = w.min_batch; b <= std::min(w.max_batch, rest); ++b) {
      plan_.workers[i].batch = b;
      Sizes(i + 1, rest - b);
    }
  }
  // Local part of worker i.., drawing on the pools.
  void Split(size_t i) {
    if (i == n_) {
      Serve(0, 0);
      return;
    }
    WorkerPlan& wp = plan_.workers[i];
    for (int64_t l = 0; l <= std::min(wp.batch, left_[i]); ++l) {
      wp.local = l;
      wp.remote = wp.batch - l;
      left_[i] -= l;
      Split(i + 1);
      left_[i] += l;
    }
  }
  // Remote samples of worker i, from peers j.. (the last peer takes the rest).
  void Serve(size_t i, size_t j) {
    if (i == n_) {
      EvaluateLocalityPlan(req_, plan_);
      best_ = std::min(best_, plan_.makespan_ms);
      return;
    }
    WorkerPlan& wp = plan_.workers[i];
    int64_t assigned = 0;
    for (const auto& [peer, count] : wp.remote_from) assigned += count;
    const int64_t need = wp.remote - assigned;
    if (need == 0) {
      Serve(i + 1, 0);
      return;
    }
    if (j == n_) return;
    if (j == i) {
      Serve(i, j + 1);
      return;
    }
    for (int64_t c = std::min(need, left_[j]); c >= 0; --c) {
      if (c > 0) wp.remote_from.emplace_back(req_.workers[j].node, c);
      left_[j] -= c;
      Serve(i, j + 1);
      left_[j] += c;
      if (c > 0) wp.remote_from.pop_back();
    }
  }

  const PlanRequest& req_;
  size_t n_;
  Plan plan_;
  std::vector<int64_t> left_;
  double best_ = std::numeric_limits<double>::infinity();
};

PlanRequest Tiny(uint64_t seed, int workers, int64_t batch) {
  testing::InstanceOptions opt;
  opt.min_workers = workers;
  opt.max_workers = workers;
  opt.overlap = seed % 2 == 1;
  opt.heterogeneity = static_cast<testing::Heterogeneity>(seed % 3);
  PlanRequest req = testing::RandomInstance(seed, opt);
  // Few samples per worker so the search is small; keep the zipf shares.
  req.global_batch = batch;
  int64_t total = 0;
  for (const WorkerInput& w : req.workers) total += w.local_available;
  int64_t placed = 0;
  for (WorkerInput& w : req.workers) {
    w.local_available = w.local_available * 3 * batch / total;
    w.min_batch = std::min<int64_t>(w.min_batch, 1);
    w.max_batch = batch;
    placed += w.local_available;
  }
  req.workers[0].local_available += 3 * batch - placed;
  req.unconsumed_in_epoch = 3 * batch;
  return req;
}

TEST_CASE("bound is below the brute-force integer optimum on tiny instances", "[bound][exact]") {
  struct Shape {
    int workers;
    int64_t batch;
  };
  int tight = 0, cases = 0;
  for (Shape shape : {Shape{2, 12}, Shape{3, 6}}) {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      const PlanRequest req = Tiny(seed, shape.workers, shape.batch);
      const double opt = BruteForce(req).Run();
      auto bound = LowerBoundMs(req);
      REQUIRE(bound.ok());
      auto plan = MakePolicy("loft").value()->PlanIteration(req);
      REQUIRE(plan.ok());
      INFO("workers " << shape.workers << " B " << shape.batch << " seed " << seed << " bound "
                      << bound.value() << " optimum " << opt << " loft " << plan.value().makespan_ms);
      CHECK(bound.value() <= opt * (1 + 1e-9));
      CHECK(plan.value().makespan_ms >= opt * (1 - 1e-9));
      ++cases;
      if (opt <= bound.value() + testing::OneSampleSlack(req)) ++tight;
    }
  }
  // With a dozen samples one sample is a large share of the makespan; the
  // relaxation is still within one sample's time of the optimum mostly.
  WARN("brute force: " << tight << " of " << cases << " optima within one sample of the bound");
  CHECK(tight >= cases * 3 / 4);
}

TEST_CASE("exact LP: a worker does not read remotely from itself", "[bound][exact]") {
  // All samples on worker 0, whose disk is slow (0.1 ms/sample) but whose
  // link and uplink are fast; worker 1 caches nothing and computes slowly.
  // Aggregated supply would let worker 0 "fetch" from its own uplink at
  // 0.001 ms/sample; really it must read locally: T = 1 + 0.11·l0 with
  // worker 1 taking r1 = B − l0 through worker 0's uplink, T = 1 + a +
  // (0.001 + 1)·r1 → balanced: 0.11·l = 1.001·(100 − l) + 0.5.
  PlanRequest req;
  req.global_batch = 100;
  req.unconsumed_in_epoch = 1000;
  for (int i = 0; i < 2; ++i) {
    WorkerInput w;
    w.node = i;
    w.cost.compute_fixed_ms = 1;
    w.cost.compute_per_sample_ms = i == 0 ? 0.01 : 1.0;
    w.cost.local_per_sample_ms = 0.1;
    w.cost.remote_fixed_ms = 0.5;
    w.cost.remote_per_sample_ms = 0.001;
    w.cost.uplink_per_sample_ms = 0.001;
    w.max_batch = 100;
    w.local_available = i == 0 ? 1000 : 0;
    req.workers.push_back(w);
  }
  const double l = (100 * 1.001 + 0.5) / (0.11 + 1.001);
  const double exact = 1 + 0.11 * l;
  auto bound = LowerBoundMs(req);
  REQUIRE(bound.ok());
  CHECK(bound.value() == Approx(exact).epsilon(1e-5));
  auto plan = MakePolicy("loft").value()->PlanIteration(req);
  REQUIRE(plan.ok());
  CHECK(plan.value().makespan_ms >= bound.value());
  CHECK(plan.value().makespan_ms <= exact + 0.11 + 1.001);
}

}  // namespace
}  // namespace loft::sched
