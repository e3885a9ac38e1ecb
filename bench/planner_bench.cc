// planner_bench: (1) plan + assign latency, median over repetitions, on
// one core, for each policy at (N, B) = (16, 1024), (256, 16384),
// (1024, 65536), (10000, 262144): the policy's PlanIteration (sizes)
// PLUS Assigner::Assign turning the plan into concrete sample ids with a
// source each, on an EpochSampler over a Placement that matches the
// request (the request's local_available are the placement's per-node
// counts; one replica; fresh epoch). Reported per policy: "median_ms"
// (plan + assign, timed together per repetition), "policy_ms" and
// "assign_ms" (medians of the two parts), "rollback_ms" (restoring the
// sampler afterwards, as SchedulerState's dry run does; not in
// median_ms). The lower bound ("bound") is sizing only. (2) quality over
// the random suite used by tests/unit/scheduler/quality_suite_test.cc:
// mean and worst makespan ratios loft/bound, loft/lbbsp, loft/pid,
// loft/uniform per heterogeneity class. (3) "epoch": whole epochs of loft
// and loft-epoch on the latency instances and on milder placements (first
// plan, epoch mean, last iteration, bound-epoch). Prints one JSON object.
// Usage: planner_bench [--instances N] [--reps R] [--max-workers N]
//                      [--policies uniform,lbbsp,pid,loft,loft-epoch]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/placement.h"
#include "scheduler/assigner.h"
#include "scheduler/bound.h"
#include "scheduler/epoch_sampler.h"
#include "scheduler/plan.h"
#include "scheduler/testing/epoch_runs.h"
#include "scheduler/testing/random_instances.h"

namespace {

using loft::sched::PlanRequest;
namespace testing = loft::sched::testing;

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Stat {
  double sum = 0, worst = 0;
  int count = 0;
  void Add(double r) {
    sum += r;
    worst = std::max(worst, r);
    ++count;
  }
  nlohmann::json Json() const { return {{"mean", count ? sum / count : 0}, {"worst", worst}, {"n", count}}; }
};

}  // namespace

int main(int argc, char** argv) {
  int instances = 510;
  int reps = 21;
  int max_workers = 10000;
  std::vector<std::string> policies = {"uniform", "lbbsp", "pid", "loft", "loft-epoch"};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--instances") == 0) instances = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--max-workers") == 0) max_workers = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--policies") == 0) {
      policies.clear();
      std::string list = argv[i + 1];
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        policies.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    }
  }
  if (reps < 1 || instances < 0) return std::fprintf(stderr, "--reps must be >= 1, --instances >= 0\n"), 2;
  nlohmann::json out;
  out["latency"] = nlohmann::json::array();
  const std::vector<std::pair<int, int64_t>> sizes = {
      {16, 1024}, {256, 16384}, {1024, 65536}, {10000, 262144}};
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  for (auto [n, b] : sizes) {
    if (n > max_workers) continue;
    PlanRequest req = testing::PlannerBenchInstance(n, b, 4242);
    // A placement whose per-node counts are exactly the request's
    // local_available (largest-remainder quotas of integer weights).
    std::vector<double> weights;
    for (const auto& w : req.workers) weights.push_back(static_cast<double>(w.local_available));
    auto placement = loft::Placement::Make(req.unconsumed_in_epoch, weights, 1, 4242);
    if (!placement.ok())
      return std::fprintf(stderr, "placement: %s\n", placement.status().ToString().c_str()), 1;
    loft::sched::EpochSampler sampler(&*placement, 99);
    for (auto& w : req.workers) w.local_available = sampler.available(w.node);
    const std::vector<bool> live(static_cast<size_t>(n), true);
    nlohmann::json row = {{"workers", n}, {"global_batch", b}, {"samples", req.unconsumed_in_epoch}};
    for (const std::string& name : policies) {
      std::vector<double> total, pol, asg, rb;
      double makespan = 0, assigned_makespan = 0;
      int64_t assigned = 0;
      for (int k = 0; k < reps; ++k) {
        auto policy = loft::sched::MakePolicy(name).value();  // fresh memory each repetition
        const auto t0 = Clock::now();
        auto plan = policy->PlanIteration(req);
        const auto t1 = Clock::now();
        if (!plan.ok())
          return std::fprintf(stderr, "%s: %s\n", name.c_str(), plan.status().ToString().c_str()), 1;
        sampler.BeginTrial();
        auto a =
            loft::sched::Assigner::Assign(*plan, req, policy->locality_aware(), *placement, live, sampler);
        const auto t2 = Clock::now();
        sampler.RollbackTrial();
        const auto t3 = Clock::now();
        if (!a.ok())
          return std::fprintf(stderr, "%s assign: %s\n", name.c_str(), a.status().ToString().c_str()), 1;
        makespan = plan->makespan_ms;
        assigned_makespan = a->makespan_ms;
        assigned = a->assigned;
        total.push_back(ms_since(t0, t2));
        pol.push_back(ms_since(t0, t1));
        asg.push_back(ms_since(t1, t2));
        rb.push_back(ms_since(t2, t3));
      }
      row[name] = {{"median_ms", MedianMs(total)},
                   {"policy_ms", MedianMs(pol)},
                   {"assign_ms", MedianMs(asg)},
                   {"rollback_ms", MedianMs(rb)},
                   {"reps", reps},
                   {"makespan_ms", makespan},
                   {"assigned_makespan_ms", assigned_makespan},
                   {"assigned", assigned}};
    }
    {
      const int r = std::max(3, reps / 4);
      std::vector<double> ms;
      double makespan = 0;
      for (int k = 0; k < r; ++k) {
        const auto t0 = Clock::now();
        auto v = loft::sched::LowerBoundMs(req);
        ms.push_back(ms_since(t0, Clock::now()));
        if (!v.ok()) return std::fprintf(stderr, "bound: %s\n", v.status().ToString().c_str()), 1;
        makespan = v.value();
      }
      row["bound"] = {
          {"median_ms", MedianMs(ms)}, {"reps", r}, {"makespan_ms", makespan}, {"sizing_only", true}};
    }
    std::fprintf(stderr, "%s\n", row.dump().c_str());
    out["latency"].push_back(row);
  }
  // (3) Whole epochs on the latency instances ("bench", zipf exponent up
  // to 1.5: one node holds ~30 % of the samples) and on the same instances
  // with a milder placement ("mild", exponent ≤ 0.5), under the cost model:
  // first-plan makespan, epoch mean and last iteration of loft and
  // loft-epoch, and bound-epoch at the epoch start. README-planning.md
  // "planner_bench: first plans" explains the figures.
  out["epoch"] = nlohmann::json::array();
  for (auto [n, b] : sizes) {
    if (n > max_workers) continue;
    for (const auto& [label, skew] :
         std::vector<std::pair<std::string, double>>{{"bench", 1.5}, {"mild", 0.5}}) {
      PlanRequest req = testing::PlannerBenchInstance(n, b, 4242, skew);
      req.iterations_left_in_epoch = (req.unconsumed_in_epoch + b - 1) / b;
      auto bound = loft::sched::EpochBoundMs(req);
      if (!bound.ok()) return std::fprintf(stderr, "bound-epoch: %s\n", bound.status().ToString().c_str()), 1;
      nlohmann::json row = {{"workers", n},
                            {"global_batch", b},
                            {"placement", label},
                            {"iterations", req.iterations_left_in_epoch},
                            {"bound_epoch_ms", *bound}};
      for (const char* name : {"loft", "loft-epoch"}) {
        auto policy = loft::sched::MakePolicy(name).value();
        auto run = testing::DriveEpoch(*policy, req);
        if (!run.ok())
          return std::fprintf(stderr, "%s epoch: %s\n", name, run.status().ToString().c_str()), 1;
        row[name] = {{"first_plan_ms", run->times.front()},
                     {"epoch_mean_ms", run->mean},
                     {"last_iteration_ms", run->times.back()}};
      }
      std::fprintf(stderr, "%s\n", row.dump().c_str());
      out["epoch"].push_back(row);
    }
  }
  std::map<std::string, std::map<std::string, Stat>> quality;
  for (int k = 0; k < instances; ++k) {
    testing::InstanceOptions opt;
    opt.heterogeneity = static_cast<testing::Heterogeneity>(k % 3);
    opt.overlap = (k / 3) % 2 == 1;
    const PlanRequest req = testing::RandomInstance(static_cast<uint64_t>(k), opt);
    const std::string cls(testing::HeterogeneityName(opt.heterogeneity));
    auto bound = loft::sched::LowerBoundMs(req);
    auto loft = loft::sched::MakePolicy("loft").value()->PlanIteration(req);
    if (!bound.ok() || !loft.ok()) return std::fprintf(stderr, "instance %d failed\n", k), 1;
    const double lm = loft.value().makespan_ms;
    quality[cls]["loft/bound"].Add(lm / bound.value());
    quality["all"]["loft/bound"].Add(lm / bound.value());
    for (const char* name : {"lbbsp", "pid", "uniform"}) {
      auto p = loft::sched::MakePolicy(name).value()->PlanIteration(req);
      if (!p.ok()) return std::fprintf(stderr, "instance %d %s failed\n", k, name), 1;
      const std::string key = std::string("loft/") + name;
      quality[cls][key].Add(lm / p.value().makespan_ms);
      quality["all"][key].Add(lm / p.value().makespan_ms);
    }
  }
  for (auto& [cls, stats] : quality) {
    for (auto& [key, st] : stats) out["quality"][cls][key] = st.Json();
  }
  out["quality_instances"] = instances;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
