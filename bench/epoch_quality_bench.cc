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
// With the spec's compute jitter: the Monte Carlo expectation of
// loft-epoch's own plans under it, and bound-epoch under the same jitter
// (scheduler/jitter_bound.h) ALONGSIDE the jitter-free bound-epoch: the
// per-draw ("wait-and-see", --jitter-draws, default 32) and the
// non-anticipative SAA LP (--saa-draws S per LP, default 64,
// --saa-replications R, default 2), and bound_epoch_under_jitter_ms, the
// largest of bound-epoch and those two (all three are lower bounds under
// jitter; the Monte Carlo ones in expectation).
// Usage: epoch_quality_bench [--instances N] [--first SEED] [--max-workers N]
//        epoch_quality_bench --spec FILE [--jitter-draws N] [--saa-draws S]
//                            [--saa-replications R]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/placement.h"
#include "scheduler/bound.h"
#include "scheduler/jitter_bound.h"
#include "scheduler/plan.h"
#include "scheduler/testing/epoch_runs.h"
#include "scheduler/testing/jitter_runs.h"
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

int RunSpec(const std::string& path, int jitter_draws, int saa_draws, int saa_replications) {
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
  std::vector<double> sigma;
  for (const auto& w : req.workers) sigma.push_back(spec->nodes[static_cast<size_t>(w.node)].compute.jitter);
  uint64_t rng = 12345;
  double jitter_sum = 0;
  for (const loft::sched::Plan& plan : e->plans)
    jitter_sum += testing::ExpectedJitteredMakespanMs(req, plan, sigma, /*draws=*/64, rng);
  const double jitter_mean = jitter_sum / static_cast<double>(e->plans.size());
  // bound-epoch under the same jitter (scheduler/jitter_bound.h): the mean
  // over draws of bound-epoch with jittered compute costs, a lower bound on
  // every stationary plan's expected iteration time. Alongside, not instead.
  const auto tj = Clock::now();
  auto jb = loft::sched::EpochJitterBoundMs(req, sigma, jitter_draws, /*seed=*/1);
  if (!jb.ok()) return std::fprintf(stderr, "%s\n", jb.status().ToString().c_str()), 1;
  const double jb_s = std::chrono::duration<double>(Clock::now() - tj).count();
  const auto ts = Clock::now();
  auto saa = loft::sched::EpochJitterSaaBoundMs(req, sigma, saa_draws, saa_replications, /*seed=*/1);
  if (!saa.ok()) return std::fprintf(stderr, "%s\n", saa.status().ToString().c_str()), 1;
  const double saa_s = std::chrono::duration<double>(Clock::now() - ts).count();
  // bound-epoch itself is also a lower bound under jitter (E[f] ≥ 1 and the
  // iteration time is convex and increasing in f: Jensen), so the largest
  // of the three is the jitter-aware bound.
  const double under_jitter = std::max({*bound, jb->mean_ms, saa->mean_ms});
  nlohmann::json out = {
      {"spec", path},
      {"loft_epoch_with_compute_jitter_ms", jitter_mean},
      {"loft_epoch_with_compute_jitter/bound_epoch", jitter_mean / *bound},
      {"bound_epoch_jitter_ms", jb->mean_ms},
      {"bound_epoch_jitter_stderr_ms", jb->stderr_ms},
      {"bound_epoch_jitter_draws", jb->draws},
      {"bound_epoch_jitter_solve_s", jb_s},
      {"loft_epoch_with_compute_jitter/bound_epoch_jitter", jitter_mean / jb->mean_ms},
      {"bound_epoch_jitter_saa_ms", saa->mean_ms},
      {"bound_epoch_jitter_saa_stderr_ms", saa->stderr_ms},
      {"bound_epoch_jitter_saa_draws", saa->draws},
      {"bound_epoch_jitter_saa_solve_s", saa_s},
      {"loft_epoch_with_compute_jitter/bound_epoch_jitter_saa", jitter_mean / saa->mean_ms},
      {"bound_epoch_under_jitter_ms", under_jitter},
      {"loft_epoch_with_compute_jitter/bound_epoch_under_jitter", jitter_mean / under_jitter},
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
  int jitter_draws = 32, saa_draws = 64, saa_replications = 2;
  std::string spec;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--instances") == 0) {
      instances = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--first") == 0) {
      first = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--spec") == 0) {
      spec = argv[i + 1];
    } else if (std::strcmp(argv[i], "--jitter-draws") == 0) {
      jitter_draws = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--saa-draws") == 0) {
      saa_draws = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--saa-replications") == 0) {
      saa_replications = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--max-workers") == 0) {
      max_workers = std::atoi(argv[i + 1]);
    } else {
      return std::fprintf(
                 stderr,
                 "unknown flag %s (--instances, --first, --max-workers, --spec, --jitter-draws, --saa-draws, "
                 "--saa-replications)\n",
                 argv[i]),
             2;
    }
  }
  if (!spec.empty()) {
    if (jitter_draws < 1 || saa_draws < 1 || saa_replications < 1)
      return std::fprintf(stderr, "--jitter-draws, --saa-draws, --saa-replications >= 1\n"), 2;
    return RunSpec(spec, jitter_draws, saa_draws, saa_replications);
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
