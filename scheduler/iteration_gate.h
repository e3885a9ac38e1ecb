// IterationGate: when the next iteration may be planned, and when the job
// is finished. One rule for the daemon (server/service.cc) and anything
// else that drives a JobDriver through the iteration protocol.
//
//  - Start gate: the first iteration waits until `min_workers` live,
//    connected workers (0 = every spec node; capped at the spec's size).
//  - Finish test: every target iteration planned and none in flight.
//  - Plan-ahead (plan_ahead = 1): iteration t+1 is planned while t runs
//    only when (a) every earlier iteration is complete (at most two open),
//    (b) all of t's partitions have been sent (no send queue holds one),
//    (c) the membership view is the one t was planned in and (d) every
//    live node got a partition of t. (c) and (d) keep the trainers' rounds
//    in order: each member of t's ring receives its partition of t before
//    its partition of t+1. Otherwise (and always with plan_ahead = 0) t+1
//    waits until t is complete (BSP). After a restart the last plan's
//    workers are unknown: the gate waits for a complete iteration once.
//
// Not responsible for: planning (JobDriver), sending, clocks.
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/scheduler_state.h"

namespace loft::sched {

struct IterationGateOptions {
  int plan_ahead = 0;             // 0 = BSP, 1 = plan t+1 while t runs
  int64_t target_iterations = 0;  // iterations in the job
  int min_workers = 0;            // live workers before the first plan; 0 = every spec node
};

class IterationGate {
 public:
  IterationGate(IterationGateOptions options, int num_nodes);

  // Every target iteration planned and none in flight.
  bool Finished(const SchedulerState& st) const;
  // Every target iteration planned (the last ones may still run).
  bool AllPlanned(const SchedulerState& st) const {
    return st.next_iteration() >= options_.target_iterations;
  }
  // Workers needed before the first plan.
  int workers_needed() const { return need_; }
  bool MayStart(int live_connected_workers) const { return live_connected_workers >= need_; }
  // Whether the next iteration may be planned now (BSP, or ahead: above).
  // `send_queues_empty`: no planned partition waits to be sent.
  bool ReadyToPlan(const SchedulerState& st, bool send_queues_empty) const;
  // Records the iteration just planned, its view and which nodes got a
  // non-empty partition (conditions (c) and (d)); returns how many did.
  int OnPlanned(int64_t iteration, int64_t view, const std::vector<char>& workers_with_samples);

  int plan_ahead() const { return options_.plan_ahead; }
  int64_t target_iterations() const { return options_.target_iterations; }
  int64_t last_planned_iteration() const { return last_planned_iteration_; }

 private:
  IterationGateOptions options_;
  int need_ = 0;
  int64_t last_planned_iteration_ = -1;  // -1 = none yet in this process
  int64_t last_planned_view_ = -1;
  std::vector<char> last_planned_workers_;
};

}  // namespace loft::sched
