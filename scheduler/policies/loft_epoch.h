// loft-epoch: stationary drain planning (README-planning.md "loft-epoch").
// Without replication bound-epoch's LP pins node j's drain per iteration at
// h_j = H_j·B/ΣH (H_j = its unconsumed cached samples, local_available).
// Each iteration the drains are apportioned to integers (largest
// remainder, Σ = B) and re-derived from what is actually left, so rounding
// residue carries over (no node systematically short) and drift —
// failures, re-measured costs — is absorbed at the next iteration. The
// iteration itself is planned by loft on the request whose pools are the
// drains (a tight pool: everything offered is taken; loft chooses who
// reads what locally or from which peer), then balanced by the drain
// search (policies/drain_search.h). When the epoch's last iteration is
// partial each worker keeps min(H_j, min_batch_j) back for it.
// Rollout: on small clusters near the epoch's end (kRollout* below), greedy loft and the
// stationary drain are each rolled out to the epoch's end under the cost
// model; the iteration follows the cheaper (a non-stationary schedule can
// beat the stationary one on small clusters).
// With replication the drains are not pinned (a shared sample can go to
// either holder): the iteration is planned by loft on pools capped at
// ⌈h_j·(1 + slack)⌉ (ΣH replaced by min(ΣH, unconsumed_in_epoch)), and a
// second plan with alt_slack when a serving uplink sets the first plan's
// makespan, taken when `margin` faster.
// An iteration planned with nothing in flight (req.pipelined false, with
// overlap: the job's and each epoch's first) has its batch sizes chosen
// under the cost model without overlap — its reads precede its compute —
// and its predicted times under the cost model as asked.
// Not responsible for: concrete sample ids (the Assigner), cost fitting.
// Thread-safety: stateless between calls; not shared across threads by
// contract.
#pragma once

#include "scheduler/plan.h"
#include "scheduler/policies/loft.h"

namespace loft::sched {

class LoftEpochPolicy final : public Policy {
 public:
  // slack, alt_slack ≥ 0: how much faster than its steady rate a node may
  // be drained in the main and the alternative plan.
  explicit LoftEpochPolicy(double slack = 0.0, double alt_slack = 0.05, double margin = 0.1)
      : slack_(slack), alt_slack_(alt_slack), margin_(margin) {}
  std::string_view name() const override { return "loft-epoch"; }
  bool locality_aware() const override { return true; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override;
  // Without the rollout (tests, benchmarks of the stationary part alone).
  void set_rollout(bool on) { rollout_ = on; }

  // Rollouts only with ≤ kRolloutMaxWorkers workers, ≤
  // kRolloutMaxIterations iterations left and workers × iterations left ≤
  // kRolloutMaxWork: each costs 2 × iterations-left plans per iteration.
  static constexpr int64_t kRolloutMaxWorkers = 64;
  static constexpr int64_t kRolloutMaxIterations = 24;
  static constexpr int64_t kRolloutMaxWork = 256;

 private:
  // The stationary plan (no rollout); pool = Σ local_available ≥ B.
  StatusOr<Plan> PlanStationary(const PlanRequest& req, int64_t pool);
  // Σ of the cost model's makespans of `first` and of the plans that follow
  // it to the epoch's end (greedy: loft; else PlanStationary).
  double RolloutTotal(const PlanRequest& req, const Plan& first, bool greedy);

  double slack_;
  double alt_slack_;
  double margin_;
  bool rollout_ = true;
  LoftPolicy loft_;
};

}  // namespace loft::sched
