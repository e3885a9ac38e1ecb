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

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

// Up to this many workers LowerBoundMs solves the relaxation's exact LP.
inline constexpr size_t kExactLpMaxWorkers = 64;

// InvalidArgument for a malformed request (ValidatePlanRequest),
// FailedPrecondition when live workers cache fewer than B samples.
StatusOr<double> LowerBoundMs(const PlanRequest& req);

// bound-epoch: lower bound on the iteration time of the best stationary
// plan for the rest of the epoch — every live node j drained at the steady
// rate h_j = H_j·B/ΣH samples per iteration (= H_j/K when the H_j add up
// to K·B), so every iteration of the stationary plan has the same time and
// the epoch's mean iteration time equals it. H_j = unconsumed_by_node[j]
// (parallel to req.workers: samples on node j not yet consumed this epoch,
// exclusive counts when the caller has them); empty → local_available.
// Solved as LowerBoundMs on the request with local_available_j =
// ⌈h_j⌉: with Σ⌈h⌉ ≈ B every node must give up (locally or to peers)
// about h_j samples, the uplink rule s_j ≤ T/up_j applies, and fixed costs
// (a_i, l0) are treated as in LowerBoundMs (charged only when the part is
// non-zero, relaxed to the convex hull) — so the result is a valid lower
// bound on any stationary plan's iteration time (⌈·⌉ and the hull only
// loosen it). With replication the H_j overlap and h_j is an approximation
// (the replicas' holders are not allowed to share the drain).
// InvalidArgument on a malformed request or a span of the wrong size or
// with negative entries; FailedPrecondition when ΣH < B.
StatusOr<double> EpochBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node = {});

}  // namespace loft::sched
