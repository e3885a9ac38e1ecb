// Robust reducers: N input vectors of equal length d (+ optional
// non-negative weights, e.g. batch sizes b_i) -> one output vector.
//
//   mean               sum w_i x_i / sum w_i; the plain mean when no
//                      weights are given (w_i = 1).
//   weighted_mean      the same, but weights are required.
//   median             coordinate-wise weighted median (equal weights when
//                      none given: the usual median, mid-point for even N).
//   trimmed_mean       per coordinate, drop k = floor(trim_fraction * N)
//                      (or k = trim_count when set; e.g. the number f of
//                      tolerated Byzantine workers, since floor(0.2 * 4) = 0)
//                      lowest and k highest values, weighted mean of the rest.
//   multi_krum         score_i = sum of squared distances to the N - f - 2
//                      nearest other vectors; the m lowest-scoring vectors
//                      are averaged with their weights (Blanchard et al. 2017).
//   centered_clipping  start at the coordinate-wise median, then
//                      `clip_iterations` times v <- v + sum w_i clip_tau(x_i - v)
//                      / sum w_i, clip_tau(z) = z * min(1, tau/||z||)
//                      (Karimireddy et al. 2021). tau = clip_tau when it is
//                      > 0; with clip_tau = 0 (the default) tau is, in each
//                      iteration, the lower median of the distances
//                      ||x_i - v||. A fixed radius is only robust at the
//                      scale it was set for: a model delta of several local
//                      steps (or a small gradient) lies well inside a radius
//                      of 1, nothing is clipped, and the rule is the plain
//                      mean. The median distance follows the honest inputs'
//                      spread at any scale, and with more than half the
//                      inputs honest it is no larger than an honest one.
//
// Weights: an input with weight 0 is absent for EVERY reducer (it is
// dropped before reducing, so it neither shifts ranks nor counts towards
// N); positive weights are used as stated above. Which weights a data-
// parallel job passes is AggregationWeights' policy (below).
//
// Non-finite inputs (NaN, +-Inf): mean and weighted_mean are poisoned by
// design (an Inf/NaN input gives Inf/NaN output; they are the non-robust
// baselines). The robust reducers treat non-finite values as outliers:
// median and trimmed_mean drop non-finite coordinates before ranking
// (trimming still removes k per side of the finite rest when more than 2k
// remain, else the median of the finite values is used); multi_krum and
// centered_clipping exclude any vector with a non-finite coordinate. When
// nothing finite is left for a coordinate (or vector set) the reducer
// returns DataLoss instead of inventing a value.
//
// Not responsible for: chunking or communication (models/ring_allreduce.h).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loft::models {

enum class ReducerKind { kMean, kWeightedMean, kMedian, kTrimmedMean, kMultiKrum, kCenteredClipping };

// "mean" | "weighted_mean" | "median" | "trimmed_mean" | "multi_krum" | "centered_clipping".
StatusOr<ReducerKind> ParseReducerKind(std::string_view name);
std::string_view ReducerKindName(ReducerKind kind);

struct ReducerOptions {
  ReducerKind kind = ReducerKind::kMean;
  double trim_fraction = 0.2;  // trimmed_mean: in [0, 0.5)
  int trim_count = -1;         // trimmed_mean: >= 0 overrides trim_fraction; needs N > 2 * trim_count
  int krum_f = 1;              // multi_krum: tolerated Byzantine inputs; needs N >= f + 3
  int krum_m = 0;              // multi_krum: vectors averaged; 0 means N - f
  double clip_tau = 0.0;       // centered_clipping radius (L2), >= 0; 0 = adaptive (see above)
  int clip_iterations = 3;     // centered_clipping, >= 1
  Status Validate() const;
};

// The weights a training job passes for worker batch sizes b_i (b_i <= 0 or
// non-finite = the worker had no samples: weight 0, absent), N = workers
// with samples:
//  - mean, weighted_mean: w_i = b_i, so the result is sum (b_i/B) g_i, the
//    gradient of the global batch B = sum b_i (each g_i is a batch mean);
//  - trimmed_mean with the planned global batch G > 0 known:
//    w_i = min(b_i, G/N), the batch size capped at an even share. The trim
//    still ranks members by count (k per side), so with k >= f every kept
//    value lies within the honest values, as with equal weights; the
//    weights only decide how the kept values are averaged, so a member on
//    a tiny batch no longer weighs as much as one on a large batch, and a
//    claim above the even share buys nothing (a Byzantine member gets at
//    most what an honest member planned an even share gets). The cap comes
//    from the plan, not from the reported sizes: a Byzantine member
//    reporting a huge b would otherwise raise it;
//  - trimmed_mean with G unknown (0), median, multi_krum,
//    centered_clipping: w_i = 1 for every worker with samples. Each honest
//    g_i is an unbiased estimate of the same full gradient, and b_i is
//    self-reported: a weighted median (or a Krum average, or a clipping
//    step) by it would let one Byzantine worker claiming a large batch
//    outvote the others: with weights, a member holding more than half the
//    weight decides a median alone, whatever value it sends.
// docs/learning-per-step.md measures why trimmed_mean needs the weights.
std::vector<double> AggregationWeights(ReducerKind kind, std::span<const double> batch_sizes,
                                       double global_batch = 0);

// inputs: N >= 1 vectors, all of out.size() floats. weights: empty (equal)
// or N finite values >= 0 with a positive sum.
Status Reduce(const ReducerOptions& options, std::span<const std::span<const float>> inputs,
              std::span<const double> weights, std::span<float> out);

// Convenience overload for vectors.
Status Reduce(const ReducerOptions& options, const std::vector<std::vector<float>>& inputs,
              std::span<const double> weights, std::vector<float>* out);

}  // namespace loft::models
