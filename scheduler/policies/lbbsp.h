// lbbsp: the LB-BSP rule. Batch sizes proportional to each worker's compute
// throughput only (samples per ms), samples from the epoch's global
// shuffle. Throughput is an EWMA of b/Tc over the worker's observations
// (weight `alpha` on the newest); before a worker's first observation it
// is 1/c1 from the request's cost parameters (1/(c0+c1) if c1 = 0 would
// divide by zero, or 1 if both are 0).
// Not responsible for: reading costs or locality (by design: that is what
// it ignores), choosing samples.
// Thread-safety: not thread-safe (Observe mutates the EWMA).
#pragma once

#include <unordered_map>

#include "scheduler/plan.h"

namespace loft::sched {

class LbBspPolicy final : public Policy {
 public:
  explicit LbBspPolicy(double alpha = 0.5) : alpha_(alpha) {}
  std::string_view name() const override { return "lbbsp"; }
  bool locality_aware() const override { return false; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override;
  void Observe(std::span<const Observation> observations) override;
  // One table, "throughput" (node -> samples/ms).
  PolicyMemory SaveMemory() const override;
  Status RestoreMemory(const PolicyMemory& memory) override;

  // Current throughput estimate of `node` in samples/ms, or 0 if unseen.
  double throughput(int32_t node) const;

 private:
  double alpha_;
  std::unordered_map<int32_t, double> throughput_;  // node -> samples/ms
};

}  // namespace loft::sched
