#include "capi/src/planner_session.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>
#include <utility>

#include "core/cluster_spec.h"
#include "scheduler/bound.h"
#include "scheduler/cost_model.h"
#include "scheduler/cost_profile.h"
#include "sim/output.h"
#include "sim/simulator.h"
#include "sim/summary.h"

namespace loft::capi {

namespace {

bool FiniteNonNegative(double x) {
  return std::isfinite(x) && x >= 0;
}

}  // namespace

struct PlannerSession::Models {
  std::vector<sched::CostModel> models;  // parallel to req_.workers
};

PlannerSession::PlannerSession(std::unique_ptr<sched::Policy> policy, int64_t global_batch, bool overlap)
    : policy_(std::move(policy)), models_(std::make_unique<Models>()) {
  req_.global_batch = global_batch;
  req_.overlap = overlap;
}

PlannerSession::~PlannerSession() = default;

StatusOr<std::unique_ptr<PlannerSession>> PlannerSession::Create(const std::string& policy,
                                                                 int64_t global_batch, bool overlap) {
  if (global_batch <= 0) {
    return InvalidArgument(fmt::format("planner: global_batch must be > 0, got {}", global_batch));
  }
  LOFT_ASSIGN_OR_RETURN(std::unique_ptr<sched::Policy> p, sched::MakePolicy(policy));
  return std::unique_ptr<PlannerSession>(new PlannerSession(std::move(p), global_batch, overlap));
}

int PlannerSession::IndexOf(int32_t node) const {
  for (size_t i = 0; i < req_.workers.size(); ++i) {
    if (req_.workers[i].node == node) return static_cast<int>(i);
  }
  return -1;
}

Status PlannerSession::AddWorker(const sched::WorkerInput& w) {
  if (w.node < 0) return InvalidArgument(fmt::format("planner: worker node must be >= 0, got {}", w.node));
  if (IndexOf(w.node) >= 0)
    return InvalidArgument(fmt::format("planner: worker {} was already added", w.node));
  for (const sched::CostField& f : sched::kCostFields) {
    const double v = w.cost.*f.member;
    const std::string_view name = f.name;
    if (!FiniteNonNegative(v)) {
      return InvalidArgument(
          fmt::format("planner: worker {}: {} must be finite and >= 0, got {}", w.node, name, v));
    }
  }
  if (w.min_batch < 0 || w.max_batch < w.min_batch) {
    return InvalidArgument(
        fmt::format("planner: worker {}: need 0 <= min_batch <= max_batch, got min {} max {}", w.node,
                    w.min_batch, w.max_batch));
  }
  if (w.local_available < 0) {
    return InvalidArgument(
        fmt::format("planner: worker {}: local_available must be >= 0, got {}", w.node, w.local_available));
  }
  req_.workers.push_back(w);
  models_->models.emplace_back(w.cost);
  return OkStatus();
}

Status PlannerSession::SetLocalAvailable(int32_t node, int64_t local_available) {
  const int i = IndexOf(node);
  if (i < 0) return NotFound(fmt::format("planner: no worker {}", node));
  if (local_available < 0) {
    return InvalidArgument(
        fmt::format("planner: worker {}: local_available must be >= 0, got {}", node, local_available));
  }
  req_.workers[i].local_available = local_available;
  return OkStatus();
}

Status PlannerSession::Observe(const sched::Observation& o) {
  const int i = IndexOf(o.node);
  if (i < 0) return NotFound(fmt::format("planner: observation for unknown worker {}", o.node));
  if (o.batch < 0 || o.local < 0 || o.remote < 0 || o.local + o.remote != o.batch) {
    return InvalidArgument(
        fmt::format("planner: worker {}: observation needs local + remote = batch >= 0, got "
                    "{} + {} vs {}",
                    o.node, o.local, o.remote, o.batch));
  }
  const std::pair<const char*, double> times[] = {{"local_read_ms", o.local_read_ms},
                                                  {"remote_read_ms", o.remote_read_ms},
                                                  {"compute_ms", o.compute_ms},
                                                  {"iteration_ms", o.iteration_ms}};
  for (const auto& [name, v] : times) {
    if (!FiniteNonNegative(v)) {
      return InvalidArgument(
          fmt::format("planner: worker {}: {} must be finite and >= 0, got {}", o.node, name, v));
    }
  }
  models_->models[i].Observe(o);
  pending_.push_back(o);
  return OkStatus();
}

StatusOr<sched::CostParams> PlannerSession::Cost(int32_t node) const {
  const int i = IndexOf(node);
  if (i < 0) return NotFound(fmt::format("planner: no worker {}", node));
  return models_->models[i].params();
}

sched::PlanRequest PlannerSession::CurrentRequest() const {
  sched::PlanRequest r = req_;
  int64_t cached = 0;
  for (size_t i = 0; i < r.workers.size(); ++i) {
    r.workers[i].cost = models_->models[i].params();
    cached += r.workers[i].local_available;
  }
  // The planner sees no epoch: the unconsumed pool is what the workers cache.
  r.unconsumed_in_epoch = cached;
  r.iterations_left_in_epoch = std::max<int64_t>(1, (cached + r.global_batch - 1) / r.global_batch);
  return r;
}

StatusOr<sched::Plan> PlannerSession::Plan() {
  if (!pending_.empty()) {
    policy_->Observe(pending_);
    pending_.clear();
  }
  const sched::PlanRequest r = CurrentRequest();
  LOFT_RETURN_IF_ERROR(sched::ValidatePlanRequest(r));
  LOFT_ASSIGN_OR_RETURN(sched::Plan plan, policy_->PlanIteration(r));
  if (plan.workers.size() != r.workers.size()) {
    return Internal(fmt::format("planner: policy {} returned {} workers for {}", policy_->name(),
                                plan.workers.size(), r.workers.size()));
  }
  int64_t sum = 0;
  for (const auto& w : plan.workers) sum += w.batch;
  if (sum != r.global_batch) {
    return Internal(
        fmt::format("planner: policy {} planned {} samples, not {}", policy_->name(), sum, r.global_batch));
  }
  ++req_.iteration;
  return plan;
}

StatusOr<double> PlannerSession::BoundMs() const {
  return sched::LowerBoundMs(CurrentRequest());
}

StatusOr<std::string> RunSimulationSummary(const std::string& spec_yaml, const std::string& policies,
                                           const SimRunOptions& options) {
  LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, ParseClusterSpec(spec_yaml, "<spec_yaml>"));
  std::vector<std::string> names;
  std::stringstream ss(policies);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) names.push_back(item);
  }
  if (names.empty()) return InvalidArgument(fmt::format("sim: policy list '{}' names no policy", policies));
  for (const std::string& n : names) {
    auto p = sched::MakePolicy(n);
    if (!p.ok()) return Status(p.status().code(), fmt::format("sim: {}", p.status().message()));
  }
  std::vector<sim::SimResult> results;
  bool bound_done = false;
  for (const std::string& n : names) {
    sim::SimOptions o;
    o.policy = n;
    o.iterations = options.iterations;
    o.seed = options.seed;
    o.trace_iterations = 0;
    // As loft-sim: the bound is evaluated along the first loft* run.
    o.compute_bound = options.compute_bound && !bound_done && n.rfind("loft", 0) == 0;
    auto r = sim::RunPolicy(spec, o);
    if (!r.ok()) {
      return Status(r.status().code(), fmt::format("sim: policy {}: {}", n, r.status().message()));
    }
    if (o.compute_bound) bound_done = true;
    results.push_back(std::move(*r));
  }
  if (options.compute_bound && !bound_done) {
    sim::SimOptions o;
    o.policy = names.front();
    o.iterations = options.iterations;
    o.seed = options.seed;
    o.trace_iterations = 0;
    o.compute_bound = true;
    auto r = sim::RunPolicy(spec, o);
    if (r.ok()) results.front().bound_mean_iteration_ms = r->bound_mean_iteration_ms;
  }
  return sim::SummaryToJson(sim::MakeSummaryFile(results));
}

}  // namespace loft::capi
