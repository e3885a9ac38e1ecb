// A plan's makespan under compute jitter, the simulator's model without
// link contention (sim/cluster_model.cc): worker i's compute costs × f_i,
// f_i = max(0.05, 1 + σ_i·Z), Z ~ N(0, 1); reads and uplinks as in the
// cost model (PredictMsWithUplink, the busiest serving peer's uplink as a
// floor). Used by bench/epoch_quality_bench --spec and the jitter-bound
// tests (scheduler/jitter_bound.h). Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace loft::sched::testing {

inline double NormalDraw(uint64_t& rng) {
  const double u1 = std::max(Uniform01(rng), 1e-300), u2 = Uniform01(rng);
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Mean over `draws` draws of the makespan of `plan` (workers parallel to
// req.workers) with compute jitter sigma[i] on worker i.
inline double ExpectedJitteredMakespanMs(const PlanRequest& req, const Plan& plan,
                                         std::span<const double> sigma, int draws, uint64_t& rng) {
  std::vector<double> uplink(req.workers.size(), 0);
  std::map<int32_t, size_t> index;
  for (size_t i = 0; i < req.workers.size(); ++i) index[req.workers[i].node] = i;
  for (const auto& wp : plan.workers) {
    for (auto [peer, count] : wp.remote_from)
      uplink[index[peer]] += static_cast<double>(count) * req.workers[index[peer]].cost.uplink_per_sample_ms;
  }
  double sum = 0;
  for (int d = 0; d < draws; ++d) {
    double makespan = 0;
    for (size_t i = 0; i < plan.workers.size(); ++i) {
      const auto& wp = plan.workers[i];
      CostParams c = req.workers[i].cost;
      const double f = std::max(0.05, 1.0 + sigma[i] * NormalDraw(rng));
      c.compute_fixed_ms *= f;
      c.compute_per_sample_ms *= f;
      double floor_ms = 0;
      for (auto [peer, count] : wp.remote_from) floor_ms = std::max(floor_ms, uplink[index[peer]]);
      makespan =
          std::max(makespan, PredictMsWithUplink(c, static_cast<double>(wp.local),
                                                 static_cast<double>(wp.remote), floor_ms, req.overlap));
    }
    sum += makespan;
  }
  return sum / draws;
}

}  // namespace loft::sched::testing
