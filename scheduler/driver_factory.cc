// JobDriver constructors that pick the policy by name (MakePolicy). In
// their own file so code that injects its own Policy does not link the
// policy registry.
#include "scheduler/driver.h"

namespace loft::sched {

StatusOr<std::unique_ptr<JobDriver>> JobDriver::Create(const ClusterSpec& spec, std::string_view policy,
                                                       StateOptions options) {
  LOFT_ASSIGN_OR_RETURN(std::unique_ptr<Policy> p, MakePolicy(policy));
  return CreateWithPolicy(spec, std::move(p), options);
}

StatusOr<std::unique_ptr<JobDriver>> JobDriver::Recover(const ClusterSpec& spec, std::string_view policy,
                                                        StateOptions options,
                                                        std::span<const loft::v1::StateUpdate> journal) {
  LOFT_ASSIGN_OR_RETURN(std::unique_ptr<Policy> p, MakePolicy(policy));
  return RecoverWithPolicy(spec, std::move(p), options, journal);
}

}  // namespace loft::sched
