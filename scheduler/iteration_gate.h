// IterationGate: when the next iteration may be planned, and when the job
// is finished. One rule for the daemon (server/service.cc) and anything
// else that drives a JobDriver through the iteration protocol.
//
//  - Start gate: the first iteration waits until `min_workers` live,
//    connected workers (0 = every spec node; capped at the spec's size).
//    With `when_ready` (the daemon's start_when_ready) a worker counts only
//    once it was heard from after its registration reply, and then the
//    start also waits, at most `peers_wait_ms`, until each of them reports
//    a handshaken peer connection to every other (CheckStart).
//  - Finish test: every target iteration planned and none in flight.
//  - Plan-ahead of depth k (1 ≤ k ≤ kMaxPlanAhead): iteration t+1 is
//    planned while t runs only when (a) every iteration before t+1-k is
//    complete (at most k open, the last k planned: t alone with k = 1,
//    t-1 and t with k = 2), (b) all of t's partitions have been sent (no
//    send queue holds one), (c) the membership view is the one t was
//    planned in and (d) every live node got a partition of t. (c) and (d)
//    keep the trainers' rounds in order: each member of t's ring receives
//    its partition of t before its partition of t+1 (with k ≥ 2 they held
//    when t was planned ahead of t-1, in the same view, so every open
//    iteration has the same members). Otherwise (and always at depth 0)
//    t+1 waits until t is complete (BSP). After a restart the last plan's
//    workers are unknown: the gate waits for a complete iteration once.
//    (b) also bounds the depth by the agents' credit windows: t+1 waits
//    until every partition of t found a credit.
//  - Depth: `plan_ahead` when set (0..kMaxPlanAhead); auto (-1): deep
//    enough that an iteration planned now reaches its agents before they
//    need it, given the control path `control_ms` (the spec's
//    scheduler.overhead_ms + handoff_ms: plan/stream, then the assignment's
//    way to the agent's reader) and T = the last plan's predicted makespan:
//      k = ceil(control_ms / T) + (overlap ? 1 : 0), at most kMaxPlanAhead.
//    Why: t+k is planned when t-1 completes, ~k·T before t+k-1 completes.
//    Without overlap t+k is read once t+k-1 is computed, so control_ms ≤
//    k·T suffices; with overlap its read starts when t+k-1's compute does,
//    up to one T earlier. With control_ms = 0 this is the former auto
//    (1 with training.overlap, else 0). With training.exchange.overlap,
//    auto goes deeper right after a round's end (ExchangePlan::ReadAhead:
//    up to ⌈exchange / step⌉ ≤ kMaxPlanAhead steps past it), so the next
//    round's first partitions reach the agents and are read while the
//    exchange runs (core/read_ahead.h). An explicit plan_ahead is kept.
//
// Not responsible for: planning (JobDriver), sending, clocks.
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <vector>

#include "core/read_ahead.h"
#include "core/status.h"
#include "scheduler/scheduler_state.h"

namespace loft::sched {

// Largest plan-ahead depth (IterationGateOptions::plan_ahead, and auto's
// cap). Agents need credits ≥ depth + 1 to take every planned iteration
// at once (loft-agent's default credits: kMaxPlanAhead + 1).
inline constexpr int kMaxPlanAhead = 3;
static_assert(kDefaultCredits == kMaxPlanAhead + 1,
              "an agent's default window takes every planned iteration");

// Auto's depth (above) for a plan predicted to take `predicted_ms`.
int AutoPlanAhead(bool overlap, double control_ms, double predicted_ms);

struct IterationGateOptions {
  // -1 = auto (above); 0 = BSP; k = plan t+1 while t-k+1 .. t run.
  int plan_ahead = 0;
  int64_t target_iterations = 0;  // iterations in the job
  int min_workers = 0;            // live workers before the first plan; 0 = every spec node
  bool overlap = false;           // auto: the spec's training.overlap
  double control_ms = 0;          // auto: the spec's scheduler.overhead_ms + handoff_ms
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
  // One live worker as the start gate sees it.
  struct WorkerReadiness {
    int32_t node = 0;
    bool connected = false;   // registered (or restored from the sessions file)
    bool confirmed = false;   // heard from after its registration reply
    int32_t peers_ready = 0;  // its last report of handshaken peer connections
  };
  struct StartCheck {
    bool start = false;
    int live = 0;                        // workers that count
    std::vector<int32_t> without_peers;  // counted workers whose peers are not all up
    double peers_waited_ms = 0;          // how long the start waited for peer connections
  };
  // The start gate (above) at `now_ms`, over the live workers. Remembers
  // when it first waited for peer connections.
  StartCheck CheckStart(const std::vector<WorkerReadiness>& live, bool when_ready, double peers_wait_ms,
                        double now_ms);
  // Whether the next iteration may be planned now (BSP, or ahead: above).
  // `send_queues_empty`: no planned partition waits to be sent.
  bool ReadyToPlan(const SchedulerState& st, bool send_queues_empty) const;
  // Records the iteration just planned, its view and which nodes got a
  // non-empty partition (conditions (c) and (d)), and its predicted
  // makespan (auto's T); returns how many nodes got one.
  int OnPlanned(int64_t iteration, int64_t view, const std::vector<char>& workers_with_samples,
                double predicted_ms = 0);

  // The configured plan-ahead (-1 = auto).
  int plan_ahead() const { return options_.plan_ahead; }
  // The depth in force now (auto: from the last plan's prediction).
  int depth() const { return depth_; }
  // The deepest depth possible (how many plans one tick may make, - 1).
  int max_depth() const { return options_.plan_ahead >= 0 ? options_.plan_ahead : kMaxPlanAhead; }
  int64_t target_iterations() const { return options_.target_iterations; }
  int64_t last_planned_iteration() const { return last_planned_iteration_; }

 private:
  IterationGateOptions options_;
  int need_ = 0;
  int64_t last_planned_iteration_ = -1;  // -1 = none yet in this process
  int64_t last_planned_view_ = -1;
  int depth_ = 0;
  std::vector<char> last_planned_workers_;
  double peers_wait_since_ms_ = -1;  // when the start first waited for peer connections
};

// The order of a scheduler tick, in both engines (the daemon's Tick, loft-
// sim's PlanLoop): stream what waited for credit first (condition (b)
// looks at the send queues), then plan and stream; with planning ahead,
// once the plan just streamed allows it, plan again (so t+1 does not wait
// for the next tick), at most max_depth() + 1 plans. `stream()` returns
// Status; `plan()` returns StatusOr<bool>, true when it planned.
template <typename StreamFn, typename PlanFn>
Status StreamAndPlan(const IterationGate& gate, StreamFn&& stream, PlanFn&& plan) {
  LOFT_RETURN_IF_ERROR(stream());
  for (int round = 0; round <= gate.max_depth(); ++round) {
    LOFT_ASSIGN_OR_RETURN(const bool planned, plan());
    LOFT_RETURN_IF_ERROR(stream());
    if (!planned) break;
  }
  return OkStatus();
}

}  // namespace loft::sched
