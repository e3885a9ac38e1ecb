// Simulator: runs one policy on a cluster spec in virtual time, driving
// the REAL scheduler (sched::JobDriver → SchedulerState, Policy, Assigner,
// Ledger, CostModel) exactly as the daemon does; only the clock (a
// ManualClock following the event queue) and the carrier of messages
// (direct calls instead of ZeroMQ) differ. No planning or ledger logic
// lives here.
//
// One BSP iteration: PlanNextIteration → every partition is marked sent
// and starts on its worker at the same virtual instant:
//   local read   l·s/disk on the worker's disk
//   remote read  per serving peer, latency_ms then one flow of
//                (samples from that peer)·s bytes through the FlowNetwork
//                (max-min fair over the peer's uplink and the reader's
//                downlink, shared with every concurrent flow)
//   compute      (c0 + c1·b)·jitter·slowdown, after the reads, or in
//                parallel with them when training.overlap (the steady
//                state of prefetching the next partition while computing
//                this one: own time = max(read, compute))
// The worker then acks PartitionDone with the measured PartitionTimings
// (what an agent reports), the cost models refit, and when no partition
// of the iteration is in flight the iteration ends (BSP barrier): its
// makespan is the slowest worker's time, every other worker waits.
//
// Iterations are gated and finished by the daemon's sched::IterationGate
// (BSP: plan_ahead 0; `overlap: true` is modelled inside each partition as
// max(read, compute), the steady state of the daemon's plan-ahead).
// Failures: at a node's failure time the driver is told OnWorkerDead (the
// partitions its death affects fail, scheduler/liveness.h: its own and
// those reading from it, and their samples return to the pool through the
// Ledger); flows it served are cut and their readers report
// PartitionFailed ("peer down"). While down the node neither trains nor
// serves (its cache is unavailable); at the end of the outage
// OnWorkerAlive. Failure detection is immediate (no heartbeat delay) and
// partition timeouts are disabled (nothing hangs in the simulator).
// All-reduce time is not modelled.
//
// Not responsible for: writing files (sim/output.h), the CLI.
// Thread-safety: not thread-safe; a Simulator runs on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/cluster_spec.h"
#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/iteration_gate.h"
#include "scheduler/run_recorder.h"
#include "sim/allreduce_model.h"
#include "sim/cluster_model.h"
#include "sim/event_queue.h"
#include "sim/flow_network.h"
#include "sim/summary.h"

namespace loft::sim {

inline constexpr int kExactFlowNodes = 256;
inline constexpr double kLargeFlowIntervalMs = 0.1;

struct SimOptions {
  std::string policy = "loft";
  int64_t iterations = 0;  // 0 = the spec's training.iterations
  uint64_t seed = 0;       // jitter seed; 0 = the spec's training.seed
  // Iterations whose spans are kept for trace.json (the first N); 0 = none.
  int64_t trace_iterations = 100;
  // Evaluate the lower bound (sched::LowerBoundMs) on every iteration's
  // plan request, with the spec's nominal costs.
  bool compute_bound = false;
  // FlowNetwork recompute interval (ms): 0 = exact max-min fair sharing;
  // < 0 = automatic: exact up to kExactFlowNodes nodes, else
  // kLargeFlowIntervalMs (see flow_network.h for what an interval means).
  double flow_interval_ms = -1;
  // Fold every planned partition into SimResult::plan_digest (tests that
  // compare the engines' decisions; costs a pass over every sample id).
  bool plan_digest = false;
  // Called after every iteration with (iterations done, total).
  std::function<void(int64_t, int64_t)> progress;
};

// One worker in one iteration, and one iteration: the run recorder's
// types (scheduler/run_recorder.h), shared with the daemon.
using sched::IterationRecord;
using sched::WorkerIteration;

// A span on a worker's track (trace.json).
struct TraceSpan {
  int32_t node = 0;
  const char* name = "";  // "local read" | "remote read" | "compute" | "wait" | "down"
  double start_ms = 0;
  double dur_ms = 0;
  int64_t iteration = 0;
};

struct SimResult {
  std::string policy;
  std::vector<IterationRecord> iterations;
  std::vector<TraceSpan> spans;
  PolicySummary summary;
  sched::LedgerCounters counters;
  double bound_mean_iteration_ms = -1;        // -1 when not computed
  double bound_epoch_mean_iteration_ms = -1;  // -1 when not computed
  uint64_t events = 0;
  // Iterations the scheduler planned by its even-split fallback because
  // the policy failed (SchedulerState::policy_failures), and the first
  // such error.
  int64_t policy_failures = 0;
  double flow_interval_ms = 0;  // the interval used
  // sched::FoldPlanDigest over every planned partition, in plan order
  // (SimOptions::plan_digest; the seed otherwise).
  uint64_t plan_digest = sched::kPlanDigestSeed;
  std::string first_policy_error;
  std::string blocked_reason;  // set when the run ended early
};

class Simulator {
 public:
  static StatusOr<std::unique_ptr<Simulator>> Create(const ClusterSpec& spec, SimOptions options);

  // Runs the configured number of iterations (or until the run cannot
  // continue: every node down for good). Errors come from the scheduler
  // code (e.g. a policy error) and are returned unchanged with context.
  StatusOr<SimResult> Run();

  const sched::JobDriver& driver() const { return *driver_; }
  const EventQueue& queue() const { return queue_; }

 private:
  struct Active;  // one partition running on a worker
  Simulator(const ClusterSpec& spec, SimOptions options, std::unique_ptr<sched::JobDriver> driver);

  void Sync();  // ManualClock follows the event queue
  void StartIteration();
  void StartPartition(loft::v1::Partition p);
  void MaybeFinishPartition(Active& a);
  // Closes the active partitions `ids` as failed; `report`: tell the
  // driver (false when it already failed them).
  void FailPartitionsOfReaders(const std::vector<uint64_t>& ids, const char* reason, bool report = true);
  void NodeDown(int node);
  void NodeUp(int node);
  void MaybeEndIteration();
  // Issue 15: the ring all-reduce and the scheduler overhead after the
  // last partition (sim/allreduce_model.h); returns the delay to add.
  double IterationTailMs();
  void Fail(Status s);
  double BoundForRequest();

  ClusterSpec spec_;
  SimOptions options_;
  std::unique_ptr<sched::JobDriver> driver_;
  EventQueue queue_;
  ManualClock clock_;
  ClusterModel model_;
  FlowNetwork network_;
  int64_t target_iterations_ = 0;
  sched::IterationGate gate_;  // the daemon's start/finish rules (BSP)
  AllreduceModel allreduce_;
  bool tail_charged_ = false;  // the current iteration's all-reduce + overhead are under way

  std::vector<std::unique_ptr<Active>> active_;  // partitions of the current iteration
  bool iteration_open_ = false;
  bool waiting_for_node_ = false;
  bool done_ = false;
  Status error_;
  IterationRecord current_;
  std::vector<bool> down_;
  SimResult result_;
  sched::RunRecorder recorder_;  // every iteration's rows and the summary figures
  double bound_sum_ = 0;
  int64_t bound_count_ = 0;
  double bound_epoch_sum_ = 0;
  int64_t bound_epoch_count_ = 0;
  int64_t bound_epoch_last_ = -1;  // epoch of the last EpochBoundMs
};

// Runs `policy` on `spec` (convenience for the CLI, tests and the bench).
StatusOr<SimResult> RunPolicy(const ClusterSpec& spec, const SimOptions& options);

}  // namespace loft::sim
