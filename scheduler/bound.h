// Lower bound on the makespan of any plan for a PlanRequest: the continuous
// relaxation of the planning problem (scheduler/plan.h) solved to a
// certificate. Evaluation only (loftctl plan --policy bound, the quality
// suite, bench/planner_bench); never used to plan.
//
// Relaxation: counts are real; each worker's feasible (local, remote) set
// at makespan T is the union of three polygons (r = 0; l = 0; both > 0,
// fixed costs charged only when the part is non-zero), relaxed to its
// convex hull; local ≤ local_available, min/max batch; peer j can serve
// s_j ≤ min(T/up_j, local_available_j − l_j) and Σ r ≤ Σ s (a worker
// reading from itself and overlapping replicas are allowed: both only
// loosen the relaxation). T is infeasible when the Lagrangian dual
// g(λ) = Σ_i max over the vertices of worker i's polygons of
// (l + r) + λ·(s_i − r), λ ∈ [0, 1], drops below B for some λ — a
// certificate by weak duality. Bisection on T returns the largest T proven
// infeasible, so the result never exceeds the relaxation's optimum and is
// a valid lower bound on every integer plan's makespan.
// Cost: O(N·V) per (T, λ) probe, V ≤ ~30 vertices per worker.
// Thread-safety: pure function.
#pragma once

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

// InvalidArgument for a malformed request (ValidatePlanRequest),
// FailedPrecondition when live workers cache fewer than B samples.
StatusOr<double> LowerBoundMs(const PlanRequest& req);

}  // namespace loft::sched
