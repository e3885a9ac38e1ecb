// loft-epoch: receding-horizon drain planning (README-planning.md
// "loft-epoch"). Each iteration, node j's drain target is its stationary
// rate h_j = H_j·B/ΣH (H_j = the node's unconsumed cached samples, taken
// from local_available; = H_j/K_left when ΣH = K_left·B), and the
// iteration is planned by loft on the request whose local_available_j is
// capped at min(H_j, ⌈h_j·(1 + slack)⌉): no node can be drained much
// faster than its steady rate, so fast nodes do not eat their samples
// early and leave the slow nodes' samples for the epoch's end. The targets
// are re-derived from the remaining H_j every iteration, so rounding and
// deviations (failures, re-measured costs) never accumulate. The capped
// request is a restriction of the real one, so loft's plan respects
// b_min/b_max, uplinks, availability and exactly-once (remote_from counts
// never exceed a peer's cached samples).
// With replication the H_j overlap; ΣH over-counts, which lowers every
// h_j (conservative: the caps only get tighter relative to the truth, and
// loft still has to place B samples within them, ⌈·⌉ and the slack keep
// Σ caps ≥ B).
// Integer plans at the exact steady caps can be poor when a node's uplink
// is tiny (one sample more served costs a whole uplink slot), so a second
// plan with caps at (1 + alt_slack)·h_j is also made when the first plan's
// makespan is set by a serving uplink, and taken when it is faster by more
// than `margin` (defaults 0.05 and 10 %, tuned on the
// random instances of tests/unit/scheduler/loft_epoch_test.cc).
// Not responsible for: concrete sample ids (the Assigner), cost fitting.
// Thread-safety: stateless; not shared across threads by contract.
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

 private:
  double slack_;
  double alt_slack_;
  double margin_;
  LoftPolicy loft_;
};

}  // namespace loft::sched
