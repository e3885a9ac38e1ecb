// Seeded random planning instances for the quality suite, the planner
// benchmark and the simulator's tests. Header-only; deterministic for a
// given (seed, options) on every platform (SplitMix64 from core/placement.h).
//
// An instance has N workers (log-uniform in [min_workers, max_workers]),
// costs derived like PriorFromSpec from random node specs: per-sample
// compute 0.02 ms × up to `compute_spread`, link down rate 100 Mbit/s ÷
// up to `bandwidth_spread` (uplink 50–100 % of it), disk 200–2000 Mbit/s,
// latency 0.2–2 ms, fixed compute 1–2 ms, 784-byte samples; a zipf-skewed
// placement (exponent in [0, max_skew], node order shuffled) of the
// unconsumed samples (B × 2–20 iterations left); B = N × 16–256;
// min_batch 0–4; max_batch B, or for a third of the workers 2–6 × B/N.
// Not responsible for: realism beyond these ranges.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "core/placement.h"
#include "scheduler/plan.h"

namespace loft::sched::testing {

enum class Heterogeneity { kCompute, kBandwidth, kBoth };

inline std::string_view HeterogeneityName(Heterogeneity h) {
  switch (h) {
    case Heterogeneity::kCompute: return "compute";
    case Heterogeneity::kBandwidth: return "bandwidth";
    case Heterogeneity::kBoth: return "both";
  }
  return "?";
}

struct InstanceOptions {
  int min_workers = 2;
  int max_workers = 256;
  double compute_spread = 8.0;     // max/min per-sample compute
  double bandwidth_spread = 50.0;  // max/min link rate
  double max_skew = 1.5;           // zipf exponent of the placement
  Heterogeneity heterogeneity = Heterogeneity::kBoth;
  bool overlap = false;
  int64_t sample_bytes = 784;
};

inline double Uniform01(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

inline double UniformIn(uint64_t& state, double lo, double hi) {
  return lo + (hi - lo) * Uniform01(state);
}

inline PlanRequest RandomInstance(uint64_t seed, const InstanceOptions& opt) {
  uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 12345;
  const double log_n = UniformIn(st, std::log(opt.min_workers), std::log(opt.max_workers + 1.0));
  const int n = std::clamp(static_cast<int>(std::exp(log_n)), opt.min_workers, opt.max_workers);
  PlanRequest req;
  req.overlap = opt.overlap;
  req.global_batch = n * static_cast<int64_t>(UniformIn(st, 16, 257));
  req.iterations_left_in_epoch = static_cast<int64_t>(UniformIn(st, 2, 21));
  req.unconsumed_in_epoch = req.global_batch * req.iterations_left_in_epoch;
  const bool het_compute = opt.heterogeneity != Heterogeneity::kBandwidth;
  const bool het_bw = opt.heterogeneity != Heterogeneity::kCompute;
  const double bits = static_cast<double>(opt.sample_bytes) * 8.0;
  auto ms_per_sample = [&](double mbps) { return bits / (mbps * 1000.0); };
  // Placement weights: zipf over a shuffled node order.
  const double skew = UniformIn(st, 0, opt.max_skew);
  std::vector<uint64_t> rank = SeededPermutation(static_cast<uint64_t>(n), SplitMix64(st));
  std::vector<double> weight(n);
  double wsum = 0;
  for (int i = 0; i < n; ++i) {
    weight[i] = 1.0 / std::pow(static_cast<double>(rank[i] + 1), skew);
    wsum += weight[i];
  }
  int64_t placed = 0;
  for (int i = 0; i < n; ++i) {
    WorkerInput w;
    w.node = i;
    CostParams& c = w.cost;
    c.compute_fixed_ms = UniformIn(st, 1, 2);
    c.compute_per_sample_ms = 0.02 * (het_compute ? std::pow(opt.compute_spread, Uniform01(st)) : 1.0);
    c.local_fixed_ms = 0;
    c.local_per_sample_ms = ms_per_sample(UniformIn(st, 200, 2000));
    const double down = 100.0 / (het_bw ? std::pow(opt.bandwidth_spread, Uniform01(st)) : 1.0);
    c.remote_fixed_ms = UniformIn(st, 0.2, 2);
    c.remote_per_sample_ms = ms_per_sample(down);
    c.uplink_per_sample_ms = ms_per_sample(down * UniformIn(st, 0.5, 1.0));
    w.min_batch = static_cast<int64_t>(UniformIn(st, 0, 5));
    w.max_batch = req.global_batch;
    if (Uniform01(st) < 1.0 / 3) {
      w.max_batch = std::max<int64_t>(w.min_batch + 1,
                                      static_cast<int64_t>(UniformIn(st, 2, 6) * req.global_batch / n));
    }
    w.local_available =
        static_cast<int64_t>(std::floor(static_cast<double>(req.unconsumed_in_epoch) * weight[i] / wsum));
    placed += w.local_available;
    req.workers.push_back(w);
  }
  // Remainder of the rounding to the first worker; keep Σ max ≥ B.
  req.workers[0].local_available += req.unconsumed_in_epoch - placed;
  int64_t sum_max = 0;
  for (const WorkerInput& w : req.workers) sum_max += w.max_batch;
  if (sum_max < req.global_batch) req.workers[0].max_batch += req.global_batch - sum_max;
  return req;
}

// One sample's time on the slowest worker: max over workers of c1 + l1 + r1.
inline double OneSampleSlack(const PlanRequest& req) {
  double s = 0;
  for (const WorkerInput& w : req.workers) {
    s = std::max(s, w.cost.compute_per_sample_ms + w.cost.local_per_sample_ms + w.cost.remote_per_sample_ms);
  }
  return s;
}

}  // namespace loft::sched::testing
