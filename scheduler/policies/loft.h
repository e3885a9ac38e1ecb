// loft: locality- and bandwidth-aware batch sizing on the full
// fetch+compute model (scheduler/plan.h, README-planning.md "loft").
//
// 1. Bisection on the target makespan T. For a given T each worker's
//    capacity is computed in O(1): the most local samples it can finish
//    (≤ local_available, ≤ max_batch), then a slope-1 segment of remote
//    samples it can add while keeping those local ones, then (without
//    overlap, when its local read is the binding constraint) a segment
//    where it trades local for remote reads at net gain l1/(l1+c1) per
//    remote sample. Remote supply is Σ_j min(T/up_j, unconsumed_j − local_j).
//    min_batch is served first, then slope-1 segments, then the trading
//    segments by decreasing gain; when min_batch needs more remote samples
//    than the leftovers supply (tight pools, loft-epoch's capped requests),
//    workers that read nothing remotely give up local samples (down to
//    their min_batch) for their spare uplink to serve. T is feasible when
//    the total reaches B. The search on T is a safeguarded secant on the
//    shortfall (samples short of B), falling back to bisection.
// 2. The fractional allocation at the smallest feasible T is floored and
//    fixed up to Σ = B with heaps (add where the resulting time is lowest,
//    remove where it is highest), respecting min/max and local_available.
// 3. remote_from: peers ordered by unconsumed samples left after their own
//    local reads, each taking at most floor(makespan/up_j) samples; a worker
//    never reads from itself.
// 4. Local search: while the slowest worker can get faster — reading one of
//    its remote samples locally, or handing one sample to the worker whose
//    cheapest addition stays below the makespan — do it (≤ 4N + 64 moves,
//    never raises the makespan). Removes rounding artefacts such as one
//    remote sample over a slow link that costs the link's whole latency.
// predicted_ms via EvaluateLocalityPlan (uplink-aware). O(N log N) per plan.
// Not responsible for: concrete sample ids (the Assigner), cost fitting,
// planning across the epoch (loft-epoch).
// Thread-safety: stateless; not shared across threads by contract.
#pragma once

#include "scheduler/plan.h"

namespace loft::sched {

class LoftPolicy final : public Policy {
 public:
  std::string_view name() const override { return "loft"; }
  bool locality_aware() const override { return true; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override;
  // The same plan, with the bisection on T started from [0, hint] when
  // hint > 0 is a makespan the fractional model reaches (e.g. the makespan
  // of a plan for a more constrained request); saves the doubling steps.
  StatusOr<Plan> PlanIteration(const PlanRequest& req, double makespan_hint_ms);
  // The same for a request the caller has already validated
  // (ValidatePlanRequest) — loft-epoch's capped copies of its own request.
  StatusOr<Plan> PlanValidated(const PlanRequest& req, double makespan_hint_ms);
};

}  // namespace loft::sched
