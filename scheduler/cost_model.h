// CostModel: a worker's cost parameters (scheduler/plan.h CostParams)
// fitted online from the timings it reports.
//
// Method: one two-parameter recursive least squares (RLS) per linear law,
//   compute      compute_ms     = c0 + c1·batch
//   local read   local_read_ms  = l0 + l1·local     (only when local > 0)
//   remote read  remote_read_ms = a  + r1·remote    (only when remote > 0)
// with a forgetting factor λ (default 0.98: an effective memory of ~50
// partitions, so slow drifts such as thermal throttling or a changed link
// are tracked while per-partition noise averages out). RLS rather than an
// EWMA because the laws have two parameters: an EWMA of per-sample cost
// cannot separate the fixed from the per-sample part, RLS does as soon as
// two distinct sizes are seen, in O(1) per observation.
// - Cold start: the RLS starts at the prior (PriorFromSpec) with covariance
//   diag((prior_scale·max(|θ0|, 1 ms))², (prior_scale·max(|θ1|, 1e-3))²):
//   a ridge penalty toward the prior that keeps the estimate sane while all
//   observations have the same size, and fades with the forgetting factor.
// - Wind-up: with forgetting, an unexcited direction's covariance grows as
//   1/λ per step; it is capped at the prior's trace.
// - Warm-up: each law's first `warmup` observations are not fitted (they
//   count as rejected): a node's first remote reads set up connections
//   and its first reads touch cold cache blocks; on the testbed they took
//   36 and 18 ms where the steady read of the same size took 4–5 ms, and
//   a law fitted to them plans no remote read again, so it never sees one
//   that would correct it.
// - Outliers: an observation whose a-priori residual exceeds
//   outlier_k × 1.4826 × median(|recent accepted residuals|) (a MAD scale;
//   floor 1 % of the prediction) is rejected once the window holds
//   min_residuals observations; before that (cold start), one whose
//   residual exceeds cold_k × max(|prediction|, 1 ms) (default 2: more
//   than 3× the prediction): a read of a cold block, over a connection
//   still being set up or by an agent throttled at start-up, 3–25× the
//   steady cost on the testbed, would otherwise set the law (one such
//   remote read moved the intercept from 2 to 39 ms and no remote read
//   was planned again). `accept_after` consecutive rejections are taken
//   as a regime change and accepted, so a real slowdown (or a prior far
//   too optimistic) is learnt.
// - Uplink (s/up as a serving peer): observations carry no serving time,
//   so it stays at the prior unless ObserveUplink reports (samples, ms)
//   measured by the serving agent; then an EWMA (weight uplink_alpha) of
//   ms/sample, with the same outlier rule.
// - Decode (encoded samples): a fourth RLS on the per-sample form of
//   decode_ms = d0·samples + d1·KB, i.e. decode_ms/samples = d0 + d1·(KB/
//   samples), from each report's preprocessing time and the stored bytes
//   it decoded (Observation::decode_*): records vary in size, so the mean
//   KB per sample varies between partitions, but little (per-record spread
//   / √samples): the split of the two terms stays near the prior's for
//   long, the cost at the typical size is learnt quickly.
//   Its prior is DecodePriorFromSpec; decode_params() gives the law.
// Estimates are made ≥ 0 keeping the law's prediction where the data
// pin it: the x* = −P01/P11 at which the prediction's variance φᵀPφ is
// least (the weighted centre of the observations). A negative slope
// becomes 0 with intercept θ0 + θ1·x*, a negative intercept 0 with slope
// (θ0 + θ1·x*)/x*; clamping each alone (what was done before 2026-11-27)
// turned noisy remote reads of 9–28 samples, 5.7 ms on average, into a law of
// 7.7 ms + 0/sample, and the planner read nothing remotely again.
// Not responsible for: deciding sizes (policies), choosing which worker's
// model an observation belongs to (CostModelSet does that by node).
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::sched {

struct CostModelOptions {
  double forgetting = 0.98;   // RLS λ, in (0, 1]
  double prior_scale = 1.0;   // prior std-dev relative to the prior values
  double outlier_k = 5.0;     // residuals beyond k robust std-devs are rejected
  double cold_k = 2.0;        // before min_residuals: residuals beyond k × max(|prediction|, 1 ms)
  int residual_window = 16;   // residuals kept for the MAD scale
  int min_residuals = 6;      // the MAD rule from this many residuals on (cold_k before)
  int accept_after = 3;       // consecutive rejections that signal a regime change
  int warmup = 2;             // each law's first observations, not fitted (counted as rejected)
  double uplink_alpha = 0.2;  // EWMA weight of a new uplink measurement
  Status Validate() const;
};

// Everything a RobustLinearRls has learnt (a scheduler-state snapshot
// stores it; RobustLinearRls::Restore rebuilds the same estimator).
struct RlsState {
  double theta[2] = {0, 0};
  double p[2][2] = {{0, 0}, {0, 0}};
  std::vector<double> residuals;  // oldest first
  int consecutive_rejections = 0;
  int64_t accepted = 0;
  int64_t rejected = 0;
};

// y = θ0 + θ1·x by RLS with forgetting, a prior and MAD outlier rejection.
class RobustLinearRls {
 public:
  RobustLinearRls(double theta0, double theta1, const CostModelOptions& opts);
  // Returns false when the point was rejected as an outlier.
  bool Update(double x, double y);
  double intercept() const { return theta_[0]; }
  double slope() const { return theta_[1]; }
  double Predict(double x) const { return theta_[0] + theta_[1] * x; }
  // (intercept, slope), both ≥ 0, equal to the estimate when it is, else
  // keeping its prediction at the best-determined x (header comment).
  std::pair<double, double> NonNegative() const;
  int64_t accepted() const { return accepted_; }
  int64_t rejected() const { return rejected_; }
  RlsState state() const;
  // Replaces what was learnt (the prior's trace cap stays). InvalidArgument,
  // and nothing changed, when a value is not finite, a count is negative
  // or there are more residuals than the window holds.
  Status Restore(const RlsState& s);

 private:
  CostModelOptions opts_;
  double theta_[2];
  double p_[2][2];
  double trace_cap_;
  std::deque<double> residuals_;  // |a-priori residual| of accepted points
  int consecutive_rejections_ = 0;
  int64_t accepted_ = 0;
  int64_t rejected_ = 0;
};

// Everything a CostModel has learnt.
struct CostModelState {
  RlsState compute, local, remote;
  RlsState decode;  // θ = (per_sample_ms, per_kb_ms)
  double uplink_per_sample_ms = 0;
  int uplink_rejections = 0;
  int64_t observations = 0;
};

class CostModel {
 public:
  explicit CostModel(const CostParams& prior, const CostModelOptions& opts = {});
  CostModel(const CostParams& prior, const DecodeCost& decode_prior, const CostModelOptions& opts = {});
  void Observe(const Observation& o);
  void ObserveUplink(int64_t samples, double ms);
  CostParams params() const;
  // The fitted decode law (both terms ≥ 0, as params()).
  DecodeCost decode_params() const;
  int64_t observations() const { return observations_; }
  // Observations rejected as outliers, over all three laws.
  int64_t rejected() const { return compute_.rejected() + local_.rejected() + remote_.rejected(); }
  CostModelState state() const;
  // As RobustLinearRls::Restore, for the three laws and the uplink; on an
  // error nothing changed.
  Status Restore(const CostModelState& s);

 private:
  CostModelOptions opts_;
  RobustLinearRls compute_, local_, remote_, decode_;
  double uplink_per_sample_ms_;
  int uplink_rejections_ = 0;
  int64_t observations_ = 0;
};

// One CostModel per node, created from its prior on first use.
// Thread-safety: not thread-safe.
class CostModelSet {
 public:
  explicit CostModelSet(const CostModelOptions& opts = {}) : opts_(opts) {}
  void SetPrior(int32_t node, const CostParams& prior,
                const DecodeCost& decode_prior = {});  // (re)starts the node's model
  // Observations for nodes without a prior are ignored (counted in ignored()).
  void Observe(std::span<const Observation> observations);
  // The node's fitted parameters; NotFound when no prior was set.
  StatusOr<CostParams> params(int32_t node) const;
  StatusOr<DecodeCost> decode_params(int32_t node) const;
  int64_t ignored() const { return ignored_; }

 private:
  CostModelOptions opts_;
  std::unordered_map<int32_t, CostModel> models_;
  int64_t ignored_ = 0;
};

}  // namespace loft::sched
