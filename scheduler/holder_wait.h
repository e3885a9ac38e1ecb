// HolderWait: how long planning waits for crashed holders (spec
// scheduler.holder_wait_s).
//
// A pooled sample whose holders are all dead is not handed out
// (scheduler/assigner.h). A crashed node may come back, so the job waits
// for it: planning is blocked once every pooled sample of the open epochs
// that the planner could use is held only by dead nodes. The wait is
// bounded: once the last of those dead holders (evicted ones aside: their
// samples are already left out) has been dead for holder_wait_s, the
// driver applies HoldersAbandoned (state.proto): those samples are left
// out of their epoch as unavailable (SchedulerState::held_out), the epoch
// completes and training goes on. They are pooled again in the next epoch
// and are handed out if their holder is back by then (else they wait, and
// are left out at once, the wait having expired already).
//
// To keep an epoch whose every sample is held by dead nodes from being
// left out over and over with nothing trained, a wait expires only when an
// iteration was planned since the last HoldersAbandoned.
//
// Pure: the time comes in as an argument; the daemon (server/) and the
// simulator (sim/) both ask JobDriver::PlanNextIteration, which applies
// it, and report the wait from CheckHolderWait.
// Not responsible for: declaring nodes dead (liveness.h), evictions
// (accusations.h; SchedulerState applies WorkerEvicted).
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <vector>

namespace loft::sched {

class SchedulerState;

struct HolderWait {
  bool waiting = false;               // planning is blocked on dead holders
  int64_t samples = 0;                // pooled samples with no live holder (open epochs)
  std::vector<int32_t> dead_holders;  // dead, not evicted nodes holding pooled samples
  double waited_ms = 0;               // since the last of dead_holders died
  double limit_ms = 0;                // scheduler.holder_wait_s, in ms
  bool may_abandon = false;           // an iteration was planned since the last HoldersAbandoned
  bool expired() const { return waiting && may_abandon && waited_ms >= limit_ms; }
  // When the wait expires (the caller's time base), if it is waiting.
  double expires_at_ms(double now_ms) const { return now_ms + (limit_ms - waited_ms); }
};

// The wait at `now_ms`. Not waiting when a live node can be given work
// from the pool, the pool is empty, no node is live, or no dead node holds
// pooled samples. O(nodes), plus O(pooled samples) to tell whether it is
// waiting; with only_if_expired (the driver, every blocked plan) the
// O(pooled) part runs only once the wait could have expired (otherwise
// `waiting` is left false).
HolderWait CheckHolderWait(const SchedulerState& state, double now_ms, bool only_if_expired = false);

}  // namespace loft::sched
