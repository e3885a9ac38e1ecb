// epoch_quality_bench: loft-epoch's quality over whole epochs on the
// epoch suite (scheduler/README-planning.md "Epoch quality suite"):
// random heterogeneous instances (scheduler/testing/random_instances.h:
// 2–256 workers, compute spread ≤ 8×, link spread ≤ 50×, zipf-skewed
// placements, both overlap modes) at the start of an epoch with K whole
// iterations, each driven through the epoch under the cost model (no
// jitter, no link contention) by loft-epoch and by loft. Prints one JSON
// object: per heterogeneity class and over all instances, mean and worst
// of loft-epoch's mean iteration / bound-epoch (EpochBoundMs at the epoch
// start), loft-epoch / loft (epoch means), loft-epoch's per-iteration
// balance (each plan's makespan over the exact fractional optimum of that
// iteration with the plan's drains fixed: worst ratio, and the share of
// iterations not within max(2 %, one sample on the slowest worker)), and
// the instances where loft-epoch is > 2 % slower than loft, and the gap of
// the hull bound that bound-epoch falls back to above
// kExactEpochLpMaxWorkers (exact LP / hull).
// With --spec FILE (no replication): the spec's first epoch instead, from
// FirstIterationRequest (spec priors, the spec's placement) under the same
// cost model: bound-epoch (and its solve time), loft-epoch's and loft's
// epoch means and ratios — the specs' "without jitter or contention" figure.
// Usage: epoch_quality_bench [--instances N] [--first SEED] [--max-workers N]
//        epoch_quality_bench --spec FILE
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "core/placement.h"
#include "scheduler/bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/epoch_runs.h"
#include "scheduler/testing/random_instances.h"

namespace {

namespace testing = loft::sched::testing;

struct Stat {
  double sum = 0, worst = 0;
  int count = 0;
  uint64_t worst_seed = 0;
  void Add(double r, uint64_t seed) {
    sum += r;
    if (r > worst) worst = r, worst_seed = seed;
    ++count;
  }
  nlohmann::json Json() const {
    return {{"mean", count ? sum / count : 0}, {"worst", worst}, {"worst_seed", worst_seed}, {"n", count}};
  }
};

int RunSpec(const std::string& path) {
  using Clock = std::chrono::steady_clock;
  auto spec = loft::LoadClusterSpecFile(path);
  if (!spec.ok()) return std::fprintf(stderr, "%s\n", spec.status().ToString().c_str()), 1;
  auto placement = loft::Placement::FromSpec(spec.value());
  if (!placement.ok()) return std::fprintf(stderr, "%s\n", placement.status().ToString().c_str()), 1;
  if (placement->replication() != 1) return std::fprintf(stderr, "--spec: replication must be 1\n"), 2;
  const loft::sched::PlanRequest req = loft::sched::FirstIterationRequest(spec.value(), placement.value());
  const auto t0 = Clock::now();
  auto bound = loft::sched::EpochBoundMs(req);
  const double bound_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto epoch_policy = loft::sched::MakePolicy("loft-epoch").value();
  auto loft_policy = loft::sched::MakePolicy("loft").value();
  const auto t1 = Clock::now();
  auto e = testing::DriveEpoch(*epoch_policy, req, /*check=*/false, /*keep_plans=*/true);
  const double epoch_plan_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count() /
                               static_cast<double>(req.iterations_left_in_epoch);
  auto l = testing::DriveEpoch(*loft_policy, req);
  if (!bound.ok() || !e.ok() || !l.ok()) {
    std::fprintf(stderr, "%s / %s / %s\n", bound.status().ToString().c_str(), e.status().ToString().c_str(),
                 l.status().ToString().c_str());
    return 1;
  }
  // The spec's compute jitter alone (no contention): each worker's compute
  // time × max(0.05, 1 + jitter·Z), Z ~ N(0, 1) as in sim/cluster_model,
  // 64 draws per plan; the expected makespan of loft-epoch's own plans.
  uint64_t rng = 12345;
  auto normal = [&rng]() {
    const double u1 = std::max(testing::Uniform01(rng), 1e-300), u2 = testing::Uniform01(rng);
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  };
  double jitter_sum = 0;
  for (const loft::sched::Plan& plan : e->plans) {
    std::vector<double> uplink(req.workers.size(), 0);
    std::map<int32_t, size_t> index;
    for (size_t i = 0; i < req.workers.size(); ++i) index[req.workers[i].node] = i;
    for (const auto& wp : plan.workers) {
      for (auto [peer, count] : wp.remote_from)
        uplink[index[peer]] +=
            static_cast<double>(count) * req.workers[index[peer]].cost.uplink_per_sample_ms;
    }
    double sum = 0;
    const int draws = 64;
    for (int d = 0; d < draws; ++d) {
      double makespan = 0;
      for (size_t i = 0; i < plan.workers.size(); ++i) {
        const auto& wp = plan.workers[i];
        loft::sched::CostParams c = req.workers[i].cost;
        const double f = std::max(
            0.05, 1.0 + spec->nodes[static_cast<size_t>(req.workers[i].node)].compute.jitter * normal());
        c.compute_fixed_ms *= f;
        c.compute_per_sample_ms *= f;
        double floor_ms = 0;
        for (auto [peer, count] : wp.remote_from) floor_ms = std::max(floor_ms, uplink[index[peer]]);
        makespan = std::max(makespan, loft::sched::PredictMsWithUplink(c, static_cast<double>(wp.local),
                                                                       static_cast<double>(wp.remote),
                                                                       floor_ms, req.overlap));
      }
      sum += makespan;
    }
    jitter_sum += sum / draws;
  }
  const double jitter_mean = jitter_sum / static_cast<double>(e->plans.size());
  nlohmann::json out = {{"spec", path},
                        {"loft_epoch_with_compute_jitter_ms", jitter_mean},
                        {"loft_epoch_with_compute_jitter/bound_epoch", jitter_mean / *bound},
                        {"workers", req.workers.size()},
                        {"iterations", req.iterations_left_in_epoch},
                        {"bound_epoch_ms", *bound},
                        {"bound_epoch_solve_s", bound_s},
                        {"loft_epoch_ms", e->mean},
                        {"loft_epoch_last_decile_ms", e->last_decile},
                        {"loft_epoch_plan_ms", epoch_plan_ms},
                        {"loft_ms", l->mean},
                        {"loft_last_decile_ms", l->last_decile},
                        {"loft_epoch/bound_epoch", e->mean / *bound},
                        {"loft_epoch/loft", e->mean / l->mean}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int instances = 210;
  uint64_t first = 0;
  int max_workers = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--instances") == 0) {
      instances = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--first") == 0) {
      first = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--spec") == 0) {
      return RunSpec(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--max-workers") == 0) {
      max_workers = std::atoi(argv[i + 1]);
    } else {
      return std::fprintf(stderr, "unknown flag %s (--instances, --first, --max-workers, --spec)\n", argv[i]),
             2;
    }
  }
  if (instances < 1 || max_workers < 2)
    return std::fprintf(stderr, "--instances >= 1, --max-workers >= 2\n"), 2;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::map<std::string, std::map<std::string, Stat>> stats;
  nlohmann::json slower = nlohmann::json::array();
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(instances); ++seed) {
    const loft::sched::PlanRequest req = testing::EpochSuiteInstance(seed, max_workers);
    auto bound = loft::sched::EpochBoundMs(req);
    auto hull = loft::sched::EpochHullBoundMs(req);
    auto epoch_policy = loft::sched::MakePolicy("loft-epoch").value();
    auto loft_policy = loft::sched::MakePolicy("loft").value();
    auto e = testing::DriveEpoch(*epoch_policy, req, /*check=*/true);
    auto l = testing::DriveEpoch(*loft_policy, req);
    if (!bound.ok() || !hull.ok() || !e.ok() || !l.ok()) {
      std::fprintf(stderr, "instance %llu failed: %s / %s / %s\n", static_cast<unsigned long long>(seed),
                   bound.status().ToString().c_str(), e.status().ToString().c_str(),
                   l.status().ToString().c_str());
      return 1;
    }
    const std::string cls(testing::HeterogeneityName(static_cast<testing::Heterogeneity>(seed % 3)));
    const double vs_bound = e->mean / *bound, vs_loft = e->mean / l->mean;
    for (const std::string& c : {cls, std::string("all")}) {
      stats[c]["loft-epoch/bound-epoch"].Add(vs_bound, seed);
      stats[c]["loft-epoch/loft"].Add(vs_loft, seed);
      stats[c]["loft/bound-epoch"].Add(l->mean / *bound, seed);
      // The exact LP over the hull bound used above kExactEpochLpMaxWorkers.
      if (req.workers.size() <= loft::sched::kExactEpochLpMaxWorkers)
        stats[c]["bound-epoch_lp/hull"].Add(*bound / *hull, seed);
      stats[c]["worst_iteration/fixed_drain_lp"].Add(e->worst_vs_fixed_drain, seed);
      stats[c]["unbalanced_iteration_share"].Add(
          1.0 - static_cast<double>(e->balanced_iterations) / static_cast<double>(e->times.size()), seed);
    }
    if (vs_loft > 1.02) {
      slower.push_back({{"seed", seed},
                        {"workers", req.workers.size()},
                        {"loft_epoch_ms", e->mean},
                        {"loft_ms", l->mean},
                        {"bound_epoch_ms", *bound}});
    }
    std::fprintf(stderr, "seed %llu N %zu K %lld bound %.4f loft-epoch %.4f (%.4f) loft %.4f (%.4f)\n",
                 static_cast<unsigned long long>(seed), req.workers.size(),
                 static_cast<long long>(req.iterations_left_in_epoch), *bound, e->mean, vs_bound, l->mean,
                 l->mean / *bound);
  }
  nlohmann::json out;
  for (auto& [cls, m] : stats) {
    for (auto& [key, st] : m) out["quality"][cls][key] = st.Json();
  }
  out["instances"] = instances;
  out["first_seed"] = first;
  out["loft_epoch_slower_than_loft_by_2pct"] = slower;
  out["wall_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
