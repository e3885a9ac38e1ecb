// loftctl plan: plans the first iteration of a cluster spec with one policy
// and prints the per-worker sizes and predicted times (and the lower bound).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "core/placement.h"
#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "tools/loftctl/commands.h"

namespace loft::ctl {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;

struct PlanArgs {
  std::string cluster;
  std::string policy = "loft";
  bool json = false;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "loftctl plan: %s\n", s.ToString().c_str());
  return kExitError;
}

int RunPlan(const PlanArgs& args) {
  auto spec = LoadClusterSpecFile(args.cluster);
  if (!spec.ok()) return Fail(spec.status());
  auto placement = Placement::FromSpec(spec.value());
  if (!placement.ok()) return Fail(placement.status());
  const sched::PlanRequest req = sched::FirstIterationRequest(spec.value(), placement.value());
  auto bound = sched::LowerBoundMs(req);
  if (!bound.ok()) return Fail(bound.status().WithContext("lower bound"));
  auto bound_epoch = sched::EpochBoundMs(req);
  if (!bound_epoch.ok()) return Fail(bound_epoch.status().WithContext("epoch bound"));
  sched::Plan plan;
  plan.policy = args.policy;
  if (args.policy == "bound") {
    plan.makespan_ms = bound.value();
  } else if (args.policy == "bound-epoch") {
    plan.makespan_ms = bound_epoch.value();
  } else {
    auto policy = sched::MakePolicy(args.policy);
    if (!policy.ok()) return Fail(policy.status());
    auto planned = policy.value()->PlanIteration(req);
    if (!planned.ok()) return Fail(planned.status());
    plan = std::move(planned).value();
  }
  const ClusterSpec& s = spec.value();
  if (args.json) {
    nlohmann::json out;
    out["policy"] = args.policy;
    out["makespan_ms"] = plan.makespan_ms;
    out["bound_ms"] = bound.value();
    out["bound_epoch_ms"] = bound_epoch.value();
    out["workers"] = nlohmann::json::array();
    for (const sched::WorkerPlan& wp : plan.workers) {
      out["workers"].push_back({{"name", s.nodes[wp.node].name},
                                {"batch", wp.batch},
                                {"local", wp.local},
                                {"remote", wp.remote},
                                {"predicted_ms", wp.predicted_ms}});
      // dataset.decode_placement auto: the holders that decode for this worker.
      if (!wp.decoded_from.empty()) {
        nlohmann::json names = nlohmann::json::array();
        for (int32_t h : wp.decoded_from) names.push_back(s.nodes[static_cast<size_t>(h)].name);
        out["workers"].back()["decoded_from"] = names;
      }
    }
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("policy %s  global_batch %lld  overlap %s  workers %d\n", args.policy.c_str(),
              static_cast<long long>(req.global_batch), req.overlap ? "true" : "false", s.num_nodes());
  if (!plan.workers.empty()) {
    std::printf("%-24s %8s %8s %8s %14s\n", "worker", "batch", "local", "remote", "predicted_ms");
    for (const sched::WorkerPlan& wp : plan.workers) {
      std::printf("%-24s %8lld %8lld %8lld %14.3f\n", s.nodes[wp.node].name.c_str(),
                  static_cast<long long>(wp.batch), static_cast<long long>(wp.local),
                  static_cast<long long>(wp.remote), wp.predicted_ms);
      for (int32_t h : wp.decoded_from)
        std::printf("%-24s   decoded by its holder %s\n", "", s.nodes[static_cast<size_t>(h)].name.c_str());
    }
  }
  std::printf("makespan_ms %.3f  bound_ms %.3f  (makespan/bound %.4f)  bound_epoch_ms %.3f\n",
              plan.makespan_ms, bound.value(), bound.value() > 0 ? plan.makespan_ms / bound.value() : 0.0,
              bound_epoch.value());
  return kExitOk;
}

}  // namespace

void RegisterPlanCommands(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "plan the first iteration of a cluster spec with one policy");
  cmd->add_option("--cluster", args->cluster, "cluster spec YAML")->required();
  cmd->add_option("--policy", args->policy, "uniform|lbbsp|pid|loft|loft-epoch|bound|bound-epoch")
      ->check(CLI::IsMember({"uniform", "lbbsp", "pid", "loft", "loft-epoch", "bound", "bound-epoch"}))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON instead of a table");
  cmd->callback([args, exit_code] { *exit_code = RunPlan(*args); });
}

}  // namespace loft::ctl
