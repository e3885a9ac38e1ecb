#include "scheduler/policies/uniform.h"

#include <vector>

#include "scheduler/policies/apportion.h"

namespace loft::sched {

StatusOr<Plan> UniformPolicy::PlanIteration(const PlanRequest& req) {
  const std::vector<double> weights(req.workers.size(), 1.0);
  return ShufflePlanFromWeights(req, weights, name());
}

}  // namespace loft::sched
