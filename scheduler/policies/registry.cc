// MakePolicy: the one place that maps policy names to implementations.
#include <fmt/format.h>

#include "scheduler/plan.h"
#include "scheduler/policies/lbbsp.h"
#include "scheduler/policies/loft.h"
#include "scheduler/policies/loft_epoch.h"
#include "scheduler/policies/pid.h"
#include "scheduler/policies/uniform.h"

namespace loft::sched {

StatusOr<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  if (name == "uniform") return std::unique_ptr<Policy>(std::make_unique<UniformPolicy>());
  if (name == "lbbsp") return std::unique_ptr<Policy>(std::make_unique<LbBspPolicy>());
  if (name == "pid") return std::unique_ptr<Policy>(std::make_unique<PidPolicy>());
  if (name == "loft") return std::unique_ptr<Policy>(std::make_unique<LoftPolicy>());
  if (name == "loft-epoch") return std::unique_ptr<Policy>(std::make_unique<LoftEpochPolicy>());
  return InvalidArgument(
      fmt::format("unknown policy '{}' (expected uniform, lbbsp, pid, loft or loft-epoch)", name));
}

}  // namespace loft::sched
