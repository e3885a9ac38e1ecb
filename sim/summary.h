// summary.json: the result format shared by `loft-sim run` (virtual time)
// and `loftctl cluster run` (real processes), DESIGN.md "One cluster spec,
// two engines":
//   {"policies": {"<name>": {"mean_iteration_ms", "p95_iteration_ms",
//     "total_s", "straggler_wait_ms", "local_bytes", "remote_bytes",
//     "final_accuracy"?, "iterations", "epochs_completed"}},
//    "bound_mean_iteration_ms", "bound_epoch_mean_iteration_ms"?}
// last_decile_iteration_ms (per policy, optional) is the mean iteration
// time over the last 10 % (at least one) of the iterations of each
// completed epoch (of every epoch seen when none completed);
// bound_epoch_mean_iteration_ms the mean over epochs of bound-epoch
// (sched::EpochBoundMs) at each epoch's first planned iteration.
// Definitions: an iteration's time is its BSP makespan (slowest worker);
// p95 is the nearest-rank 95th percentile; straggler_wait_ms is the mean,
// over every (iteration, worker), of the worker's wait at the barrier
// (makespan − own time); total_s is the run's wall (virtual) time
// including failures; local_bytes / remote_bytes count the samples of
// completed partitions, by where they were read.
// Output is deterministic: keys sorted, doubles printed shortest-exact.
//
// Not responsible for: producing the numbers (sched::RunRecorder computes
// every figure for both engines; SetFigures copies them here).
// Thread-safety: plain functions and data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/status.h"
#include "scheduler/run_recorder.h"

namespace loft::sim {

// One policy's results: the run's figures (sched::RunFigures, one
// definition for both engines: every figure comes from sched::RunRecorder)
// and what the engine knows besides.
struct PolicySummary : sched::RunFigures {
  std::optional<double> final_accuracy;
  int64_t epochs_completed = 0;
  // Iterations the scheduler planned by its fallback because the policy
  // failed (unset when the engine does not know).
  std::optional<int64_t> policy_failures;
};

// The summary.json document: every policy's results and the plans' bounds.
struct SummaryFile {
  std::map<std::string, PolicySummary> policies;  // by policy name
  std::optional<double> bound_mean_iteration_ms;
  std::optional<double> bound_epoch_mean_iteration_ms;
};

// The recorder's figures into `out` (its other fields are left as they are).
inline void SetFigures(const sched::RunFigures& f, PolicySummary* out) {
  static_cast<sched::RunFigures&>(*out) = f;
}
using sched::LastDecileMs;
using sched::Percentile;

std::string SummaryToJson(const SummaryFile& summary);
Status WriteSummaryJson(const SummaryFile& summary, const std::string& path);
// Parses a summary.json written by SummaryToJson (or by hand); errors name
// the missing or mistyped field.
StatusOr<SummaryFile> ParseSummaryJson(const std::string& text);

// A one-screen table of the policies (for stdout).
std::string SummaryTable(const SummaryFile& summary);

}  // namespace loft::sim
