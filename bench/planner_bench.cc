// planner_bench: (1) plan latency, median over repetitions, for each policy
// and the lower bound at (N, B) = (16, 1024), (256, 16384), (1024, 65536),
// (10000, 262144) on one core; (2) quality over the random suite used by
// tests/unit/scheduler/quality_suite_test.cc: mean and worst makespan
// ratios loft/bound, loft/lbbsp, loft/pid, loft/uniform per heterogeneity
// class. Prints one JSON object. Measures sizing only (policies); the
// assigner's time (concrete sample ids) is not included.
// Usage: planner_bench [--instances N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/random_instances.h"

namespace {

using loft::sched::PlanRequest;
namespace testing = loft::sched::testing;

PlanRequest ScaledInstance(int n, int64_t b, uint64_t seed) {
  testing::InstanceOptions opt;
  opt.min_workers = n;
  opt.max_workers = n;
  opt.heterogeneity = testing::Heterogeneity::kBoth;
  PlanRequest req = testing::RandomInstance(seed, opt);
  const double f = static_cast<double>(b) / static_cast<double>(req.global_batch);
  req.global_batch = b;
  int64_t placed = 0;
  for (auto& w : req.workers) {
    w.local_available = static_cast<int64_t>(static_cast<double>(w.local_available) * f);
    w.max_batch = b;
    placed += w.local_available;
  }
  req.unconsumed_in_epoch = std::max(placed, b);
  req.workers[0].local_available += req.unconsumed_in_epoch - placed;
  return req;
}

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
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--instances") == 0) instances = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  }
  nlohmann::json out;
  out["latency"] = nlohmann::json::array();
  const std::vector<std::pair<int, int64_t>> sizes = {
      {16, 1024}, {256, 16384}, {1024, 65536}, {10000, 262144}};
  for (auto [n, b] : sizes) {
    const PlanRequest req = ScaledInstance(n, b, 4242);
    nlohmann::json row = {{"workers", n}, {"global_batch", b}};
    for (const char* name : {"uniform", "lbbsp", "pid", "loft", "bound"}) {
      const int r = std::string(name) == "bound" ? std::max(3, reps / 4) : reps;
      std::vector<double> ms;
      double makespan = 0;
      for (int k = 0; k < r; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        if (std::string(name) == "bound") {
          auto v = loft::sched::LowerBoundMs(req);
          if (!v.ok()) return std::fprintf(stderr, "bound: %s\n", v.status().ToString().c_str()), 1;
          makespan = v.value();
        } else {
          auto policy = loft::sched::MakePolicy(name).value();
          auto plan = policy->PlanIteration(req);
          if (!plan.ok()) return std::fprintf(stderr, "%s: %s\n", name, plan.status().ToString().c_str()), 1;
          makespan = plan.value().makespan_ms;
        }
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      row[name] = {{"median_ms", MedianMs(ms)}, {"reps", r}, {"makespan_ms", makespan}};
    }
    out["latency"].push_back(row);
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
