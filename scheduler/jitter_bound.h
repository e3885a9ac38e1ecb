// bound-epoch under compute jitter: a lower bound on the expected
// iteration time of every stationary plan when each worker's compute time
// is multiplied, independently per worker and per iteration, by
// f = max(0.05, 1 + σ·Z), Z ~ N(0, 1) (the simulator's jitter model,
// sim/cluster_model.cc; σ = the spec node's compute.jitter). Evaluation
// only (bench/epoch_quality_bench --spec); never used to plan, and always
// reported ALONGSIDE the jitter-free bound-epoch, never in its place.
//
// Why it is valid (README-planning.md "bound-epoch under jitter"): a plan
// x is chosen before the iteration's draws f, so its expected makespan is
// E_f[M(x, f)] ≥ E_f[min_x' M(x', f)] — for every stationary plan x, the
// expectation of the per-draw optimum (the "perfect information" or
// wait-and-see value) is below it. min_x' M(x', f) is itself bounded below
// by bound-epoch (EpochBoundMs) on the request with that draw's compute
// costs, so the mean of EpochBoundMs over draws is a Monte Carlo estimate
// of a valid lower bound; `stderr_ms` is its standard error (the estimate
// is a bound up to that sampling error, not a certificate).
// It can be far above the jitter-free bound when every worker must compute
// every iteration (min_batch ≥ 1 or drains it cannot hand off): then the
// iteration ends with the slowest of N jittered fixed costs whatever the
// plan, e.g. large-1024.yaml (1,024 workers, σ = 5 %).
//
// EpochJitterSaaBoundMs, the non-anticipative bound (tighter where plans
// cannot react to the draws, e.g. large-1024): a sample-average
// approximation. One stationary plan x for all S draws f^1..f^S of an
// LP relaxation of the iteration time, min_x (1/S)·Σ_s max_i T_i(x, f^s);
// E[SAA optimum] ≤ min_x E_f[max_i T_i(x, f)] (the minimum of an average
// is at most the average at the true optimiser), so the mean of R
// independent SAA optima estimates a valid lower bound on every stationary
// plan's expected iteration time (stderr_ms over the R replications). The
// relaxation of T_i: counts real; drains d_j per iteration as bound-epoch's
// (E_j·B/U ≤ l_j + s_j ≤ H_j·B/U); reads from peers only (Σ r = Σ s,
// r_i + s_i ≤ Σ s); Σ (l + r) = B within [min_batch, max_batch]; compute
// f·(c0 + c1·(l + r)) (c0 dropped for a worker with min_batch 0, which may
// idle); the read fixed costs (disk, link latency) dropped, except that a
// read whose fixed cost exceeds the SAA value of a feasible reference plan
// (every worker reads its drain locally) is ruled out (no SAA-optimal plan
// pays it: it waits that long in every draw); overlap: max of
// compute, l·local_per_sample, r·remote_per_sample, uplink s·u; without
// overlap compute + the larger read. Each term is ≤ the cost model's, so
// every integer plan is feasible at no more than its own time.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

struct JitterBound {
  double mean_ms = 0;    // mean over draws of bound-epoch with jittered compute costs
  double stderr_ms = 0;  // standard error of that mean
  int draws = 0;
};

// sigma: one σ ≥ 0 per req.workers entry. draws ≥ 1. Uses EpochBoundMs
// (exact LP up to kExactEpochLpMaxWorkers) or, when hull_only, the hull
// bracket (EpochHullBoundMs: faster, looser, equally valid). Errors:
// InvalidArgument for a wrong-sized or negative sigma or draws < 1, and
// EpochBoundMs's errors.
StatusOr<JitterBound> EpochJitterBoundMs(const PlanRequest& req, std::span<const double> sigma, int draws,
                                         uint64_t seed, bool hull_only = false);

// draws_per_saa S ≥ 1, replications R ≥ 1 (mean_ms over R, draws = S·R).
// Same errors as EpochJitterBoundMs, Internal when the LP fails.
StatusOr<JitterBound> EpochJitterSaaBoundMs(const PlanRequest& req, std::span<const double> sigma,
                                            int draws_per_saa, int replications, uint64_t seed);

}  // namespace loft::sched
