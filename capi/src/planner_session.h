// PlannerSession: the in-process planner behind loft_planner_t. Holds a
// Policy (MakePolicy), the workers of a PlanRequest and, per worker, the
// cost model fitted from observed timings; delivers an iteration's
// observations to the policy's Observe before planning the next one.
//
// Not responsible for: choosing sample ids (the Assigner, scheduler side),
// membership or failures (the daemon), the C conventions (capi/loft_c.cc).
// Thread-safety: not thread-safe; one session per caller thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/plan.h"

namespace loft::capi {

class PlannerSession {
 public:
  // InvalidArgument/Unimplemented from MakePolicy, or a non-positive batch.
  static StatusOr<std::unique_ptr<PlannerSession>> Create(const std::string& policy, int64_t global_batch,
                                                          bool overlap);
  ~PlannerSession();

  // InvalidArgument for a duplicate or negative node, non-finite or
  // negative costs, min > max, or negative local_available.
  Status AddWorker(const sched::WorkerInput& worker);
  Status SetLocalAvailable(int32_t node, int64_t local_available);
  // Refits the node's cost model; queued for the policy's Observe.
  Status Observe(const sched::Observation& obs);
  StatusOr<sched::CostParams> Cost(int32_t node) const;

  // Delivers queued observations to the policy, then plans; the plan is
  // validated (Σ batch = B, within [min, max]).
  StatusOr<sched::Plan> Plan();
  StatusOr<double> BoundMs() const;

  int num_workers() const { return static_cast<int>(req_.workers.size()); }

 private:
  struct Models;
  PlannerSession(std::unique_ptr<sched::Policy> policy, int64_t global_batch, bool overlap);
  int IndexOf(int32_t node) const;  // -1 when absent
  sched::PlanRequest CurrentRequest() const;

  std::unique_ptr<sched::Policy> policy_;
  sched::PlanRequest req_;
  std::unique_ptr<Models> models_;
  std::vector<sched::Observation> pending_;
};

// loft_sim_run: runs each policy of the comma-separated list on the spec
// (YAML text) and returns summary.json text. Errors name the policy or
// the spec field.
struct SimRunOptions {
  int64_t iterations = 0;
  uint64_t seed = 0;
  bool compute_bound = true;
};
StatusOr<std::string> RunSimulationSummary(const std::string& spec_yaml, const std::string& policies,
                                           const SimRunOptions& options);

}  // namespace loft::capi
