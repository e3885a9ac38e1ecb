// loft-sim: plan a cluster in virtual time with the real scheduler code.
//   loft-sim run SPEC.yaml [--policy loft,lbbsp,uniform,pid] [--iterations N]
//                [--seed S] [--trace-iterations N] [--no-bound] [--plan-ahead auto|0|1|2|3]
//                [--credits N] [--no-epoch-overlap] --out DIR
// Writes DIR/summary.json, DIR/iterations.csv and DIR/trace.json, prints a
// table of the policies on stdout and progress on stderr. Exit code 1 on a
// bad spec or a failed run.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_spec.h"
#include "sim/loss_trace.h"
#include "sim/output.h"
#include "sim/simulator.h"

namespace {

std::vector<std::string> SplitPolicies(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::stringstream ss(a);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) out.push_back(item);
    }
  }
  return out;
}

// `base`: the options every policy's run shares (all but policy,
// compute_bound and progress).
int Run(const std::string& spec_path, const std::vector<std::string>& policy_args,
        const loft::sim::SimOptions& base, bool bound, const std::string& out_dir) {
  auto spec = loft::LoadClusterSpecFile(spec_path);
  if (!spec.ok()) {
    std::cerr << "loft-sim: " << spec.status().message() << "\n";
    return 1;
  }
  for (const std::string& w : loft::SpecWarnings(*spec)) std::cerr << "loft-sim: warning: " << w << "\n";
  if (spec->training.exchange.period_auto && base.loss_trace.empty())
    std::cerr
        << "loft-sim: note: training.exchange.period: auto without --loss-trace: no loss is reported in "
           "virtual time, so every round keeps the loss-free period ceil(sqrt(X/S)); a real job "
           "shortens it as its loss falls\n";
  const std::vector<std::string> policies = SplitPolicies(policy_args);
  if (policies.empty()) {
    std::cerr << "loft-sim: --policy lists no policy\n";
    return 1;
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  loft::SystemClock* wall = loft::SystemClock::Default();
  std::vector<loft::sim::SimResult> results;
  bool bound_done = false;
  for (const std::string& policy : policies) {
    loft::sim::SimOptions o = base;
    o.policy = policy;
    // The bound is evaluated once, on the first locality-aware run (or the
    // first run when no policy is locality-aware, see below).
    o.compute_bound = bound && !bound_done && policy.rfind("loft", 0) == 0;
    int64_t last_report = wall->NowMicros();
    o.progress = [&](int64_t done, int64_t total) {
      const int64_t now = wall->NowMicros();
      if (tty) {
        if (done == total || now - last_report > 100000) {
          fmt::print(stderr, "\r{:<10} iteration {}/{}{}", policy, done, total, done == total ? "\n" : "");
          last_report = now;
        }
      } else if (now - last_report > 5000000) {
        fmt::print(stderr, "loft-sim: {} iteration {}/{}\n", policy, done, total);
        last_report = now;
      }
    };
    auto r = loft::sim::RunPolicy(*spec, o);
    if (!r.ok()) {
      std::cerr << "loft-sim: " << spec_path << ": policy " << policy << ": " << r.status().ToString()
                << "\n";
      return 1;
    }
    if (!r->blocked_reason.empty()) {
      std::cerr << "loft-sim: " << policy << " stopped after " << r->iterations.size()
                << " iterations: " << r->blocked_reason << "\n";
    }
    if (r->policy_failures > 0) {
      std::cerr << "loft-sim: warning: policy " << policy << " failed on " << r->policy_failures
                << " iteration(s); the scheduler planned them by its even-split fallback (first: "
                << r->first_policy_error << ")\n";
    }
    if (o.compute_bound) bound_done = true;
    results.push_back(std::move(*r));
  }
  if (bound && !bound_done) {
    // No loft* policy was requested: evaluate the bound along the first
    // policy's run (the bound needs the pool state of a run).
    loft::sim::SimOptions o = base;
    o.policy = policies.front();
    o.trace_iterations = 0;
    o.compute_bound = true;
    auto r = loft::sim::RunPolicy(*spec, o);
    if (r.ok()) {
      results.front().bound_mean_iteration_ms = r->bound_mean_iteration_ms;
      results.front().bound_epoch_mean_iteration_ms = r->bound_epoch_mean_iteration_ms;
    }
  }
  if (auto s = loft::sim::WriteOutputDir(results, *spec, out_dir); !s.ok()) {
    std::cerr << "loft-sim: " << s.ToString() << "\n";
    return 1;
  }
  const auto summary = loft::sim::MakeSummaryFile(results);
  fmt::print("{}: {} nodes, global batch {}, {} iterations per policy\n", spec_path, spec->num_nodes(),
             spec->training.global_batch, base.iterations > 0 ? base.iterations : spec->training.iterations);
  fmt::print("{}", loft::sim::SummaryTable(summary));
  fmt::print("wrote {}/summary.json, iterations.csv, trace.json\n", out_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loft-sim: discrete-event simulation of a loft cluster with the real scheduler"};
  app.require_subcommand(1);
  CLI::App* run = app.add_subcommand("run", "simulate policies on a cluster spec");
  std::string spec_path, out_dir;
  std::vector<std::string> policies{"loft,lbbsp,uniform,pid"};
  int64_t iterations = 0;
  uint64_t seed = 0;
  int64_t trace_iterations = 100;
  bool no_bound = false;
  double flow_interval_ms = -1;
  run->add_option("spec", spec_path, "cluster spec (YAML)")->required();
  run->add_option("--policy", policies, "comma-separated policies (loft, loft-epoch, lbbsp, uniform, pid)");
  run->add_option("--iterations", iterations,
                  "iterations per policy (default: the spec's training.iterations)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--seed", seed, "jitter seed (default: the spec's training.seed)");
  run->add_option("--trace-iterations", trace_iterations, "iterations kept in trace.json (first N)")
      ->check(CLI::NonNegativeNumber);
  run->add_option(
      "--flow-interval-ms", flow_interval_ms,
      "link-sharing recompute interval; 0 = exact max-min (default: exact up to 256 nodes, else 0.1)");
  run->add_flag("--no-bound", no_bound, "skip the lower bound");
  std::string plan_ahead = "auto";
  int credits = loft::kDefaultCredits;
  bool no_epoch_overlap = false;
  run->add_option(
         "--plan-ahead", plan_ahead,
         "auto|0|1|2|3: plan iteration t+1 while t runs (k: while t-k+1 .. t run), as loft-scheduler's "
         "plan_ahead (auto: deep enough for the spec's scheduler.overhead_ms + handoff_ms)")
      ->check(CLI::IsMember({"auto", "0", "1", "2", "3"}));
  run->add_option("--credits", credits,
                  "each agent's partition window (loft-agent's credits; default: the agent's, 4)")
      ->check(CLI::Range(1, 1024));
  run->add_flag("--no-epoch-overlap", no_epoch_overlap,
                "start an epoch only once the previous one is committed (loft-scheduler's "
                "epoch_overlap: false); by default the next epoch's first iteration is planned "
                "while the last partitions are in flight");
  std::string loss_trace;
  run->add_option(
      "--loss-trace", loss_trace,
      "a real run's training.csv: its per-iteration loss is reported in virtual time, so "
      "training.exchange.period: auto shortens its periods as the real job did (sim/loss_trace.h)");
  int64_t eval_every = 0;
  run->add_option("--eval-every", eval_every,
                  "charge a test-set evaluation after every N steps' exchange and after the last, as "
                  "`loftctl cluster run --eval-every N` does (its default is 50), at training.eval's cost; "
                  "0 (the default): none")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--out", out_dir, "output directory")->required();
  CLI11_PARSE(app, argc, argv);
  loft::sim::SimOptions base;
  base.iterations = iterations;
  base.seed = seed;
  base.trace_iterations = trace_iterations;
  base.flow_interval_ms = flow_interval_ms;
  base.plan_ahead = plan_ahead == "auto" ? -1 : std::stoi(plan_ahead);
  base.credits = credits;
  base.overlap_epochs = !no_epoch_overlap;
  base.eval_every = eval_every;
  if (!loss_trace.empty()) {
    auto trace = loft::sim::LoadLossTrace(loss_trace);
    if (!trace.ok()) {
      std::cerr << "loft-sim: " << trace.status().message() << "\n";
      return 1;
    }
    base.loss_trace = std::move(*trace);
  }
  return Run(spec_path, policies, base, !no_bound, out_dir);
}
