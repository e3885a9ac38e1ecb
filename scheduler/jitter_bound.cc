#include "scheduler/jitter_bound.h"

#include <fmt/format.h>

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "scheduler/bound.h"

namespace loft::sched {

namespace {

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Normal(uint64_t& s) {
  const double u1 = std::max(static_cast<double>(SplitMix(s) >> 11) * 0x1.0p-53, 1e-300);
  const double u2 = static_cast<double>(SplitMix(s) >> 11) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

Status CheckSigma(const PlanRequest& req, std::span<const double> sigma) {
  if (sigma.size() != req.workers.size()) {
    return InvalidArgument(
        fmt::format("jitter bound: {} jitter values for {} workers", sigma.size(), req.workers.size()));
  }
  for (size_t i = 0; i < sigma.size(); ++i) {
    if (!(sigma[i] >= 0) || !std::isfinite(sigma[i])) {
      return InvalidArgument(fmt::format("jitter bound: jitter of worker {} (node {}) is {}, want >= 0", i,
                                         req.workers[i].node, sigma[i]));
    }
  }
  return Status::Ok();
}

// Mean and standard error of the mean of `v` (two passes: no cancellation).
JitterBound Summarise(const std::vector<double>& v, int draws) {
  JitterBound out;
  out.draws = draws;
  for (double x : v) out.mean_ms += x;
  out.mean_ms /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - out.mean_ms) * (x - out.mean_ms);
  const double k = static_cast<double>(v.size());
  out.stderr_ms = v.size() > 1 ? std::sqrt(ss / (k - 1) / k) : 0.0;
  return out;
}

double JitterFactor(double sigma, uint64_t& rng) {
  return sigma > 0 ? std::max(0.05, 1.0 + sigma * Normal(rng)) : 1.0;
}

// The SAA LP (jitter_bound.h) for draws f[s][i]; returns its optimum.
// cut_above: read fixed costs above it rule that read out (see RefValue).
StatusOr<double> SolveSaa(const PlanRequest& req, std::span<const double> drain_lo,
                          std::span<const double> drain_hi, const std::vector<std::vector<double>>& f,
                          double cut_above) {
  const double kInf = COIN_DBL_MAX;
  const size_t n = req.workers.size(), draws = f.size();
  std::vector<double> col_lo, col_hi, obj, row_lo, row_hi, vals;
  std::vector<int> rows, cols;
  auto col = [&](double lo, double hi, double c) {
    col_lo.push_back(lo);
    col_hi.push_back(hi);
    obj.push_back(c);
    return static_cast<int>(col_lo.size()) - 1;
  };
  auto row = [&](double lo, double hi) {
    row_lo.push_back(lo);
    row_hi.push_back(hi);
    return static_cast<int>(row_lo.size()) - 1;
  };
  auto set = [&](int r, int c, double v) {
    if (v == 0) return;
    rows.push_back(r);
    cols.push_back(c);
    vals.push_back(v);
  };
  std::vector<int> m(draws);
  for (size_t s = 0; s < draws; ++s) m[s] = col(0, kInf, 1.0 / static_cast<double>(draws));
  const int w = col(0, kInf, 0);  // w ≤ every m_s: the jitter-free terms (reads, uplink)
  for (size_t s = 0; s < draws; ++s) {
    const int r = row(0, kInf);
    set(r, m[s], 1);
    set(r, w, -1);
  }
  const int total = col(0, kInf, 0);  // S = Σ s_j = Σ r_i
  const double big_b = static_cast<double>(req.global_batch);
  const int served_sum = row(0, 0), remote_sum = row(0, 0), batch_sum = row(big_b, big_b);
  set(served_sum, total, -1);
  set(remote_sum, total, -1);
  for (size_t i = 0; i < n; ++i) {
    const WorkerInput& in = req.workers[i];
    const CostParams& c = in.cost;
    const bool no_local = c.local_fixed_ms > cut_above, no_remote = c.remote_fixed_ms > cut_above;
    const int l = col(0, no_local ? 0 : drain_hi[i], 0), r = col(0, no_remote ? 0 : kInf, 0),
              sv = col(0, drain_hi[i], 0);
    const int own = row(drain_lo[i], drain_hi[i]);  // l + s within the drain
    set(own, l, 1);
    set(own, sv, 1);
    const int self = row(-kInf, 0);  // r + s ≤ S
    set(self, r, 1);
    set(self, sv, 1);
    set(self, total, -1);
    set(served_sum, sv, 1);
    set(remote_sum, r, 1);
    set(batch_sum, l, 1);
    set(batch_sum, r, 1);
    const int b = row(static_cast<double>(in.min_batch), static_cast<double>(in.max_batch));
    set(b, l, 1);
    set(b, r, 1);
    if (c.uplink_per_sample_ms > 0) {  // w ≥ u·s
      const int up = row(0, kInf);
      set(up, w, 1);
      set(up, sv, -c.uplink_per_sample_ms);
    }
    const double c0 = in.min_batch >= 1 ? c.compute_fixed_ms : 0.0, c1 = c.compute_per_sample_ms;
    if (req.overlap) {
      const int rl = row(0, kInf), rr = row(0, kInf);  // w ≥ l·lp, w ≥ r·rp
      set(rl, w, 1);
      set(rl, l, -c.local_per_sample_ms);
      set(rr, w, 1);
      set(rr, r, -c.remote_per_sample_ms);
      for (size_t s = 0; s < draws; ++s) {  // m_s − f·c1·(l + r) ≥ f·c0
        const double fs = f[s][i];
        const int t = row(fs * c0, kInf);
        set(t, m[s], 1);
        set(t, l, -fs * c1);
        set(t, r, -fs * c1);
      }
    } else {
      for (size_t s = 0; s < draws; ++s) {  // m_s ≥ f·(c0 + c1·(l + r)) + the larger read
        const double fs = f[s][i];
        const int tl = row(fs * c0, kInf), tr = row(fs * c0, kInf);
        set(tl, m[s], 1);
        set(tl, l, -fs * c1 - c.local_per_sample_ms);
        set(tl, r, -fs * c1);
        set(tr, m[s], 1);
        set(tr, l, -fs * c1);
        set(tr, r, -fs * c1 - c.remote_per_sample_ms);
      }
    }
  }
  ClpSimplex lp;
  lp.setLogLevel(0);
  CoinPackedMatrix mat(true, rows.data(), cols.data(), vals.data(), static_cast<int>(vals.size()));
  mat.setDimensions(static_cast<int>(row_lo.size()), static_cast<int>(col_lo.size()));
  lp.loadProblem(mat, col_lo.data(), col_hi.data(), obj.data(), row_lo.data(), row_hi.data());
  lp.setPrimalTolerance(1e-9);
  lp.setDualTolerance(1e-9);
  lp.dual();
  if (lp.status() != 0)
    return Internal(fmt::format("jitter SAA bound: the LP ended with CLP status {}", lp.status()));
  // A dual-feasible basis' objective is a valid lower bound; CLP's optimum within its tolerances.
  return lp.objectiveValue();
}

// The SAA value, under the full cost model with real counts, of the plan
// "every worker reads its drain locally" (l_i = d_i = drain_hi[i], no
// remote reads), or +inf when that plan is not feasible (Σ d ≠ B, a drain
// outside [min_batch, max_batch]). Call it V. Any plan that reads remotely
// on worker i waits remote_fixed_ms_i in every draw, so its SAA value is
// ≥ remote_fixed_ms_i; when that exceeds V the plan is not the SAA
// optimum, and the LP may set r_i = 0 (likewise l_i = 0 above local_fixed_ms).
double RefValue(const PlanRequest& req, std::span<const double> drain_hi,
                const std::vector<std::vector<double>>& f) {
  double sum_d = 0;
  for (size_t i = 0; i < req.workers.size(); ++i) {
    const WorkerInput& in = req.workers[i];
    if (drain_hi[i] < static_cast<double>(in.min_batch) || drain_hi[i] > static_cast<double>(in.max_batch))
      return COIN_DBL_MAX;
    sum_d += drain_hi[i];
  }
  const double big_b = static_cast<double>(req.global_batch);
  if (std::abs(sum_d - big_b) > 1e-9 * big_b) return COIN_DBL_MAX;
  double total = 0;
  for (const auto& draw : f) {
    double makespan = 0;
    for (size_t i = 0; i < req.workers.size(); ++i) {
      const CostParams& c = req.workers[i].cost;
      const double d = drain_hi[i];
      const double compute = draw[i] * (c.compute_fixed_ms + c.compute_per_sample_ms * d);
      const double read = d > 0 ? c.local_fixed_ms + c.local_per_sample_ms * d : 0.0;
      makespan = std::max(makespan, req.overlap ? std::max(compute, read) : compute + read);
    }
    total += makespan;
  }
  return total / static_cast<double>(f.size());
}

}  // namespace

StatusOr<JitterBound> EpochJitterSaaBoundMs(const PlanRequest& req, std::span<const double> sigma,
                                            int draws_per_saa, int replications, uint64_t seed) {
  LOFT_RETURN_IF_ERROR(ValidatePlanRequest(req));
  LOFT_RETURN_IF_ERROR(CheckSigma(req, sigma));
  if (draws_per_saa < 1 || replications < 1) {
    return InvalidArgument(fmt::format("jitter SAA bound: {} draws x {} replications, want >= 1 each",
                                       draws_per_saa, replications));
  }
  // Drains per iteration as bound-epoch's (bound.h EpochBoundMs).
  const size_t n = req.workers.size();
  std::vector<double> lo(n), hi(n);
  double total = 0;
  for (size_t j = 0; j < n; ++j) total += hi[j] = static_cast<double>(req.workers[j].local_available);
  const double big_b = static_cast<double>(req.global_batch);
  if (total < big_b) {
    return FailedPrecondition(fmt::format(
        "jitter SAA bound: {} unconsumed samples on live nodes, fewer than global_batch {}", total, big_b));
  }
  const double unconsumed = static_cast<double>(req.unconsumed_in_epoch);
  const double u = unconsumed >= big_b ? std::min(total, unconsumed) : total;
  for (size_t j = 0; j < n; ++j) {
    const int64_t exclusive = req.workers[j].exclusive_available;
    const double e = exclusive >= 0 ? std::min(static_cast<double>(exclusive), hi[j]) : hi[j] - (total - u);
    lo[j] = std::max(0.0, e) * big_b / u;
    hi[j] = hi[j] * big_b / u;
  }
  uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 0x5AA;
  std::vector<double> values;
  std::vector<std::vector<double>> f(static_cast<size_t>(draws_per_saa), std::vector<double>(n));
  for (int rep = 0; rep < replications; ++rep) {
    for (auto& draw : f)
      for (size_t i = 0; i < n; ++i) draw[i] = JitterFactor(sigma[i], rng);
    LOFT_ASSIGN_OR_RETURN(double v, SolveSaa(req, lo, hi, f, RefValue(req, hi, f)));
    values.push_back(v);
  }
  return Summarise(values, draws_per_saa * replications);
}

StatusOr<JitterBound> EpochJitterBoundMs(const PlanRequest& req, std::span<const double> sigma, int draws,
                                         uint64_t seed, bool hull_only) {
  LOFT_RETURN_IF_ERROR(CheckSigma(req, sigma));
  if (draws < 1) return InvalidArgument(fmt::format("jitter bound: draws is {}, want >= 1", draws));
  uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 0x5EED;
  PlanRequest jittered = req;
  std::vector<double> values;
  for (int d = 0; d < draws; ++d) {
    for (size_t i = 0; i < req.workers.size(); ++i) {
      const double f = JitterFactor(sigma[i], rng);
      jittered.workers[i].cost.compute_fixed_ms = req.workers[i].cost.compute_fixed_ms * f;
      jittered.workers[i].cost.compute_per_sample_ms = req.workers[i].cost.compute_per_sample_ms * f;
    }
    LOFT_ASSIGN_OR_RETURN(double b, hull_only ? EpochHullBoundMs(jittered) : EpochBoundMs(jittered));
    values.push_back(b);
  }
  return Summarise(values, draws);
}

}  // namespace loft::sched
