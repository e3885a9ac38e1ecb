// Lower bound on the makespan of any plan for a PlanRequest. Evaluation
// only (loftctl plan --policy bound, the quality suite,
// bench/planner_bench); never used to plan.
//
// The relaxation (R), precisely: counts are real. Worker i picks a mode
// m ∈ {local only, remote only, both, idle}; in mode m its (l, r) must
// satisfy the DESIGN.md times with the fixed costs of that mode (l0 with
// a local read, a with a remote read, c0 always) at makespan T, plus
// min_batch ≤ l + r ≤ max_batch (idle only when min_batch = 0) and
// l ≤ local_available. R replaces each worker's union over modes by its
// convex hull at that T (Balas' disaggregation: the "convex-hull
// relaxation" of the fixed costs). Node j serves s_j samples with
// l_j + s_j ≤ local_available_j and up_j·s_j ≤ T; remote reads come from
// peers other than oneself: Σ_i r_i ≤ Σ_j s_j and r_i + s_i ≤ Σ_j s_j for
// every i (the exact feasibility condition of a transportation problem on
// the complete graph without self-loops). Σ (l + r) = B. The bound is the
// smallest T at which R is feasible. Every integer plan is feasible for R
// at its own makespan, so the bound never exceeds any plan's makespan.
// Measured (README-planning.md "Lower bound"): R equals the continuous
// optimum with exact fixed costs on every small instance tried; loft's
// remaining gap is integer rounding.
//
// How it is solved: (1) a Lagrangian certificate on an aggregated R' ⊇ R
// (only Σ r ≤ Σ s; reads from oneself allowed): T is infeasible when
// g(λ) = Σ_i max over the vertices of worker i's polygons of
// (l + r) + λ·(s_i − r) < B for some λ ∈ [0, 1]; bisection on T, O(N·V)
// per probe. (2) Up to kExactLpMaxWorkers workers, R itself as an LP
// (COIN-OR CLP) at fixed T, bisection on T from (1)'s value to 1e-7
// relative; the result is the largest T proven infeasible. Above that size
// the bound is (1)'s, which is ≤ R's optimum (equal on the random suite
// where both were computed; lower when a worker would have to read from
// itself, e.g. one node caching everything).
//
// Decode placement (encoded samples, plan.h): every bound is the bound of
// RelaxDecode(req), the plain request whose per-sample costs are at most
// those of any placement — local reads + δ_i, remote reads min(r1 + δ_i,
// ρ·r1), uplinks min(u_j, ρ·u_j + δ_j) (placement trainer: r1 + δ_i and
// u_j) — with a holder's own decode work for peers dropped and the decode
// moved inside the read max; each step only lowers a plan's time, so the
// bound includes the choice. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

// Up to this many workers LowerBoundMs solves the relaxation's exact LP.
inline constexpr size_t kExactLpMaxWorkers = 64;
// Up to this many workers EpochBoundMs solves its exact LP (~1 s at 256
// workers, ~10 s at 1,024 on this machine kind); above, the hull bound on
// pools ⌈H_j·B/U⌉ (README-planning.md "bound-epoch": measured gap).
inline constexpr size_t kExactEpochLpMaxWorkers = 256;

// InvalidArgument for a malformed request (ValidatePlanRequest),
// FailedPrecondition when live workers cache fewer than B samples.
StatusOr<double> LowerBoundMs(const PlanRequest& req);

// bound-epoch: the iteration time of the best stationary plan for the
// rest of the epoch — every iteration the same real-valued plan, node j
// drained at a steady rate — as the exact optimum of an LP relaxation.
// Rates: with U distinct unconsumed samples within reach (U =
// min(ΣH, unconsumed_in_epoch); ΣH when the span is given) node j drains
// d_j = l_j + s_j per iteration with E_j·B/U ≤ d_j ≤ H_j·B/U, where H_j =
// unconsumed_by_node[j] (parallel to req.workers; empty → local_available)
// and E_j = its exclusive samples (WorkerInput::exclusive_available, or at
// least H_j − (ΣH − U) when not given). Without replication E_j = H_j and
// d_j = H_j·B/ΣH (= H_j/K when ΣH = K·B); with replication a shared sample
// can be drained by either holder. Within an iteration: relaxation R of
// LowerBoundMs (hull of the fixed costs, per-peer uplinks s_j ≤ T/up_j, no
// reads from oneself) with d_j in place of the pool. Solved with CLP at
// fixed T and bisection on T (bracketed below by LowerBoundMs on pools
// ⌈H_j·B/U⌉, a relaxation of it) to 1e-7 relative. Valid lower bound on
// every stationary plan's iteration time; a non-stationary schedule
// (greedy loft, which loft-epoch follows when a rollout shows it cheaper)
// can average below it on small clusters. Cost: one LP per probe (~25 probes). Above
// kExactEpochLpMaxWorkers workers the bracket alone is returned (a valid
// but looser bound: drains ≤ ⌈h_j⌉ instead of = h_j, aggregated supply).
// InvalidArgument on a malformed request or a span of the wrong size or
// with negative entries; FailedPrecondition when ΣH < B.
StatusOr<double> EpochBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node = {});

// The bracket alone at any size (EpochBoundMs above kExactEpochLpMaxWorkers):
// LowerBoundMs on pools ⌈H_j·B/U⌉. ≤ EpochBoundMs. Same errors.
StatusOr<double> EpochHullBoundMs(const PlanRequest& req, std::span<const int64_t> unconsumed_by_node = {});

}  // namespace loft::sched
