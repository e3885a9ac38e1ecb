// uniform: B/N samples per worker (the remainder goes one each to the
// first workers, so the plan is deterministic), samples from the epoch's
// global shuffle. The baseline every other policy is compared against.
// Not responsible for: choosing samples (the Assigner) or locality.
// Thread-safety: stateless; PlanIteration is const-safe.
#pragma once

#include "scheduler/plan.h"

namespace loft::sched {

class UniformPolicy final : public Policy {
 public:
  std::string_view name() const override { return "uniform"; }
  bool locality_aware() const override { return false; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override;
};

}  // namespace loft::sched
