// JobDriver: the pure driving API that both the simulator (sim/, virtual
// time) and the scheduler daemon (server/, ZeroMQ) use to run a job.
// Events come in (worker registered / dead / alive, partition sent / done
// / failed, "plan now", "check timeouts"), each with the caller's now_ms;
// each method computes the StateUpdates the event implies, applies them
// to the in-memory SchedulerState, and returns them in apply order.
//
// JOURNAL-BEFORE-ACT CONTRACT (README-state.md):
//   1. call a driver method; it returns updates U (already applied in
//      memory; on error nothing was applied);
//   2. persist U (Journal::AppendAll, synced) BEFORE any external effect
//      derived from U: sending PartitionAssignments / ServeGrants /
//      MembershipViews, or replying to an agent;
//   3. then act (send the partitions found in U's iteration_planned).
// The in-memory state may run ahead of the journal, external effects
// never do. If step 2 fails the caller must not act and must restart
// from the journal (JobDriver::Recover): the lost updates were never
// visible to anyone, so the recovered scheduler is consistent.
//
// Not responsible for: sockets, threads, clocks, timers (callers call
// CheckTimeouts periodically), persistence (Journal), heartbeat
// bookkeeping (the daemon applies liveness.h's rule), the iteration gate,
// ring commits, credits (iteration_gate.h, ring_committer.h,
// flow_control.h).
// Thread-safety: not thread-safe; one driver per job, one caller thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_spec.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/plan.h"
#include "scheduler/proto/state.pb.h"
#include "scheduler/scheduler_state.h"

namespace loft::sched {

using Updates = std::vector<loft::v1::StateUpdate>;

class JobDriver {
 public:
  // Policy by name (MakePolicy: uniform | lbbsp | pid | loft | loft-epoch).
  static StatusOr<std::unique_ptr<JobDriver>> Create(const ClusterSpec& spec, std::string_view policy,
                                                     StateOptions options = {});
  // With a caller-made policy (tests, custom policies).
  static StatusOr<std::unique_ptr<JobDriver>> CreateWithPolicy(const ClusterSpec& spec,
                                                               std::unique_ptr<Policy> policy,
                                                               StateOptions options = {});
  // Rebuilds a driver from journaled updates (Journal::ReadAll()).
  static StatusOr<std::unique_ptr<JobDriver>> Recover(const ClusterSpec& spec, std::string_view policy,
                                                      StateOptions options,
                                                      std::span<const loft::v1::StateUpdate> journal);
  static StatusOr<std::unique_ptr<JobDriver>> RecoverWithPolicy(
      const ClusterSpec& spec, std::unique_ptr<Policy> policy, StateOptions options,
      std::span<const loft::v1::StateUpdate> journal);

  // Replays more journaled updates into this driver (recovery in chunks:
  // Create, then Replay each chunk of Journal::ReadInChunks in order; the
  // result equals Recover over the whole journal).
  Status Replay(std::span<const loft::v1::StateUpdate> journal);
  // Recovery from a compacted journal: Create, Restore the journal's
  // snapshot (Journal::ReadSnapshot), then Replay the entries after it; the
  // result equals replaying every entry the snapshot stands for and those
  // after it. Only on a driver that has done nothing yet
  // (SchedulerState::RestoreSnapshot has the errors).
  Status Restore(const loft::v1::StateSnapshot& snapshot);

  // Membership. Each bumps the view number by one. Registering a live
  // node again is a re-registration (restart): its in-flight partitions
  // are failed first. OnWorkerAlive on a live node returns no updates.
  StatusOr<Updates> RegisterWorker(int32_t node, double now_ms);
  StatusOr<Updates> OnWorkerAlive(int32_t node, double now_ms);
  // WorkerDead, then one PartitionFailed per in-flight partition the
  // death affects (liveness.h: the node's own and those reading from it;
  // their samples return to the pool). Dead node: no updates.
  StatusOr<Updates> OnWorkerDead(int32_t node, std::string_view reason, double now_ms);

  // An evicted node (its ring reported it; scheduler/accusations.h): as
  // OnWorkerDead when it is live, then WorkerEvicted, which leaves the
  // samples only it held out of every epoch as unavailable (it never comes
  // back); then EpochAdvanced if that completed the epoch. Already
  // evicted: no updates.
  StatusOr<Updates> OnWorkerEvicted(int32_t node, std::string_view reason, double now_ms);

  // Stops using `node` as a source for other workers (a SourceDistrusted
  // update): the caller decided that `reporters` distinct nodes
  // proved it serves forged samples. Partitions in flight are left alone
  // (their requesters refuse what it forges and fail them; the retries are
  // planned from trusted holders). Already distrusted: no updates.
  StatusOr<Updates> DistrustSource(int32_t node, int32_t reporters, double now_ms);

  // Plans the next iteration: one IterationPlanned update whose
  // partitions are to be sent (PartitionsToSend). Empty when nothing can
  // be planned now; BlockedReason() says why. Planning does not wait for
  // the previous iteration (callers that run BSP check
  // IterationComplete() first). Preceded by an EpochAdvanced update when
  // the current epoch is committed or, with StateOptions::overlap_epochs,
  // handed out entirely (SchedulerState::EpochAdvanceDue). Blocked on dead
  // holders whose wait expired (scheduler/holder_wait.h): a
  // HoldersAbandoned update (then EpochAdvanced when due) precedes the
  // plan.
  StatusOr<Updates> PlanNextIteration(double now_ms);
  const std::string& BlockedReason() const { return blocked_reason_; }
  // The assignment behind the last successful PlanNextIteration (plan and
  // assignment; its `update` is empty: it was moved into the returned
  // Updates).
  const IterationProposal& LastProposal() const { return last_proposal_; }

  // Partition events. Stale/duplicate/unknown acks produce an update that
  // Apply ignores and counts (so counters replay too). OnPartitionDone
  // appends EpochAdvanced when it commits the last open sample of every
  // open epoch (SchedulerState::EpochComplete).
  StatusOr<Updates> OnPartitionSent(uint64_t partition_id, int32_t attempt, double now_ms);
  StatusOr<Updates> OnPartitionDone(const loft::v1::PartitionDone& done, double now_ms);
  StatusOr<Updates> OnPartitionFailed(const loft::v1::PartitionFailed& failed, double now_ms);
  // One PartitionTimedOut per in-flight partition whose deadline passed.
  StatusOr<Updates> CheckTimeouts(double now_ms);

  bool IterationComplete() const { return state_->IterationComplete(); }
  const SchedulerState& state() const { return *state_; }
  // SchedulerState::SetServesDecoded (not a journaled update).
  void SetServesDecoded(int node, bool serves) { state_->SetServesDecoded(node, serves); }

  // The partitions created by the IterationPlanned updates in `updates`.
  static std::vector<loft::v1::Partition> PartitionsToSend(std::span<const loft::v1::StateUpdate> updates);

 private:
  explicit JobDriver(std::unique_ptr<SchedulerState> state) : state_(std::move(state)) {}
  Status ApplyAndAppend(loft::v1::StateUpdate u, Updates& out);
  // Applies and appends EpochAdvanced to epoch() + 1.
  Status AdvanceEpoch(Updates& out);

  std::unique_ptr<SchedulerState> state_;
  std::string blocked_reason_;
  IterationProposal last_proposal_;
};

}  // namespace loft::sched
