// pid: the dynamic-batching law of Tyagi & Sharma. Starts uniform; after
// observations, b_i ← b_i·t̄/t_i where t_i is worker i's last observed
// iteration time and t̄ the mean over the request's workers that have one,
// with a dead band: no change when |t_i − t̄|/t̄ ≤ 0.2. Then clamp to
// [min_batch, max_batch] and renormalise to Σ = B by largest remainder
// (Apportion). Samples come from the epoch's global shuffle.
// Workers it has not planned before start from B/N.
// Not responsible for: locality, choosing samples.
// Thread-safety: not thread-safe (keeps previous sizes and timings).
#pragma once

#include <unordered_map>

#include "scheduler/plan.h"

namespace loft::sched {

class PidPolicy final : public Policy {
 public:
  explicit PidPolicy(double dead_band = 0.2) : dead_band_(dead_band) {}
  std::string_view name() const override { return "pid"; }
  bool locality_aware() const override { return false; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override;
  void Observe(std::span<const Observation> observations) override;
  // Two tables: "last_batch" and "last_ms" (node -> value).
  PolicyMemory SaveMemory() const override;
  Status RestoreMemory(const PolicyMemory& memory) override;

 private:
  double dead_band_;
  std::unordered_map<int32_t, int64_t> last_batch_;  // node -> batch of the last plan
  std::unordered_map<int32_t, double> last_ms_;      // node -> last observed iteration_ms
};

}  // namespace loft::sched
