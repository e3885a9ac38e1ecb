// SchedulerState: everything the scheduler knows about one job, changed
// ONLY through Apply(StateUpdate) (model: tf.data's dispatcher_state.h).
//
// Holds: membership (view number, registered/live nodes), one CostModel
// per node (fitted from PartitionDone timings), the Policy instance, the
// EpochSampler (pool of the current epoch) and the Ledger (partitions,
// lineage, counters).
//
// Determinism contract: two SchedulerStates created with the same
// ClusterSpec, policy and options, fed the same updates, have the same
// ToJson()/Digest(). Apply never reads a clock or draws randomness: times
// come inside the updates (now_ms).
//
// Policy memory (lbbsp's EWMA, pid's sizes) is the policy's own and is not
// part of ToJson. It is learned from Observe (called by Apply when an
// iteration's last partition finishes) and from PlanIteration calls.
// PlanIteration is invoked by ProposeIteration in a live run; Replay()
// re-invokes it for each recorded IterationPlanned (with the identical
// PlanRequest, rebuilt from the replayed state) so the policy's memory is
// rebuilt too, and checks that the re-plan asks for the same sizes.
//
// Not responsible for: transport, timers, persistence (Journal), deciding
// when to plan or when a worker is dead (JobDriver / the daemon).
// Two epochs (StateOptions::overlap_epochs): EpochAdvanced may start epoch
// e+1 while e's last partitions are in flight (e's pool is empty). Then
// the state holds e's sampler as the previous epoch until its last sample
// commits (counted as a completed epoch then); acks, failures and retries
// of e's partitions go to it, and while it has returned samples to hand
// out the next iteration is planned from it (an iteration's samples are
// all of one epoch). At most two epochs are open: EpochAdvanced to e+2
// waits for e to be committed.
//
// Dead and evicted holders: a pooled sample whose holders are all dead is
// not handed out. A crashed node may come back, so planning waits for it,
// but not forever (scheduler/holder_wait.h: after spec
// scheduler.holder_wait_s the driver applies HoldersAbandoned and those
// samples are left out of their epoch). An evicted node (WorkerEvicted)
// never comes back: the samples only it held are left out at once, in
// every open epoch and every later one (lost_to_eviction()).
//
// Round-level lineage (training.exchange period > 1 or auto; the
// partitions carry delta_exchange): a local step's samples reach the agreed
// model only with its worker's delta at the round's exchange. So a done
// local step is not committed: it is held "done, pending round"
// (round_pending(); its ledger record is done, its samples stay taken). The
// worker's round-ending step commits its pending steps of earlier
// iterations when it is done (its own ack, or the ring's votes for it), or
// fails them (MarkRoundLost, samples back to the pool as the partition's
// children) when its training report says its delta was dropped (it
// fetched the agreed state at the exchange). They also fail when the
// worker dies or registers again (its parameters are gone), and when the
// round-ending iteration closes with no step of that worker in it. A
// worker whose round-ending step failed or timed out joined the exchange
// with weight 0, carrying its delta: its pending steps wait for its next
// round-ending report, which commits them (done) or fails them
// (delta_dropped: the join did not apply, so it had to fetch the agreed
// state). A done step the worker reports in_next_round
// (it had applied that round already) is pending like a local step. A step
// that hands out its epoch's last pooled samples ends its round, so an
// epoch never waits on a round that cannot end. Everything happens inside
// Apply of the updates that exist (journal replay rebuilds it); snapshots
// store the pending ids. Period 1: nothing is ever pending.
//
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/placement.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/assigner.h"
#include "scheduler/epoch_sampler.h"
#include "scheduler/exchange_plan.h"
#include "scheduler/ledger.h"
#include "scheduler/plan.h"
#include "scheduler/proto/state.pb.h"
#include "scheduler/quarantine.h"

namespace loft::sched {

class CostModel;

// What a SchedulerState is built with (job id, seed, partition timeouts,
// global batch). Not the daemon's options: those are server::SchedulerOptions
// (server/options.h), from which the daemon fills this struct.
struct StateOptions {
  uint64_t job_id = 1;
  // Epoch permutation seed; 0 = the spec's training.seed.
  uint64_t seed = 0;
  // Partition deadline = planned now_ms + max(timeout_min_ms,
  // timeout_factor · predicted_ms). timeout_min_ms = 0 disables timeouts.
  double timeout_min_ms = 10000;
  double timeout_factor = 5.0;
  // Global batch; 0 = the spec's training.global_batch.
  int64_t global_batch = 0;
  // A sample named in accepted PartitionFailed.bad_samples reports by
  // max(this, f+1) distinct workers (f = training.byzantine_tolerance),
  // who read the copies of that many distinct holders (all of them with
  // fewer holders), is quarantined: unavailable, never committed
  // (scheduler/quarantine.h). 0 = never.
  int32_t quarantine_after = 3;
  // Two epochs at once: once every sample of the current epoch is handed
  // out (its pool is empty, its last partitions in flight), the next
  // iteration is planned from the next epoch instead of waiting for those
  // partitions to commit. The previous epoch stays open until its last
  // sample commits; a failed partition's samples go back to ITS pool and
  // are planned before the new epoch's (SchedulerState, "Two epochs").
  // false: an epoch starts only when the previous one is committed.
  bool overlap_epochs = true;
  // The job's planned steps (its last one ends a round of
  // training.exchange); 0 = the spec's training.iterations.
  int64_t iterations = 0;

  Status Validate() const;
};

// The result of a dry-run plan: either an IterationPlanned update to apply
// or the reason nothing can be planned now.
struct IterationProposal {
  std::optional<loft::v1::StateUpdate> update;  // holds iteration_planned
  std::string blocked_reason;                   // set when !update
  Plan plan;                                    // the policy's plan (diagnostics)
  Assignment assignment;                        // actual counts per worker
};

class SchedulerState {
 public:
  static StatusOr<std::unique_ptr<SchedulerState>> Create(const ClusterSpec& spec,
                                                          std::unique_ptr<Policy> policy,
                                                          StateOptions options);

  // The only mutator of the state. On error nothing changed.
  Status Apply(const loft::v1::StateUpdate& update);
  // Rebuilds state (and the policy's memory) from recorded updates.
  Status Replay(std::span<const loft::v1::StateUpdate> updates);

  // Dry run: builds the PlanRequest, asks the policy, assigns samples and
  // returns the IterationPlanned update WITHOUT applying it (the sampler
  // is restored; only the policy's own memory may change). If the policy
  // fails or returns an invalid plan (Σ batch != B, workers not parallel
  // to the request), the iteration is planned by an even split with
  // global-shuffle assignment and the update records policy_error: the
  // job keeps its exactly-once guarantee and the failure is counted
  // (policy_failures()). Blocked (no
  // update) when: no live worker; the pool is empty but partitions are in
  // flight (waiting for their acks); every pooled sample is held only by
  // dead nodes (waiting for a holder to come back). An epoch whose samples
  // are all committed must first be advanced (EpochAdvanced).
  StatusOr<IterationProposal> ProposeIteration(double now_ms);

  // The request ProposeIteration would give the policy now, or an error
  // when nothing is plannable.
  StatusOr<PlanRequest> BuildPlanRequest() const;
  // Sets workers[i].exclusive_available of a request built by
  // BuildPlanRequest: pooled samples of this epoch the worker caches and no
  // other live node does (what bound-epoch needs with replication > 1).
  // O(samples · replication); BuildPlanRequest fills it itself without
  // replication and leaves -1 (unknown) otherwise.
  void FillExclusiveAvailable(PlanRequest& req) const;

  // Queries.
  const ClusterSpec& spec() const { return spec_; }
  const Placement& placement() const { return placement_; }
  const StateOptions& options() const { return options_; }
  // The current (newest) epoch's sampler.
  const EpochSampler& sampler() const { return sampler_; }
  // The previous epoch's sampler while it has uncommitted samples (two
  // epochs open, StateOptions::overlap_epochs), else null.
  const EpochSampler* previous_sampler() const { return prev_.get(); }
  // The sampler the next iteration is planned from: the previous epoch's
  // while it has assignable pooled samples (returned by a failure), else
  // the current one.
  const EpochSampler& planning_sampler() const;
  // True when an EpochAdvanced to epoch() + 1 applies now: the current
  // epoch is committed, or (overlap_epochs) its pool is empty; and no
  // previous epoch is still open.
  bool EpochAdvanceDue() const;
  // True when every sample of every open epoch is committed (the driver
  // then advances without waiting for a plan).
  bool EpochComplete() const { return prev_ == nullptr && sampler_.EpochDone(); }
  const Ledger& ledger() const { return ledger_; }
  // Which steps end a round (training.exchange).
  const ExchangePlan& exchange() const { return exchange_; }
  const Policy& policy() const { return *policy_; }
  int64_t view() const { return view_; }
  bool registered(int node) const { return registered_[node]; }
  bool alive(int node) const { return alive_[node]; }
  const std::vector<bool>& live_mask() const { return alive_; }
  std::vector<int32_t> LiveNodes() const;
  int64_t epoch() const { return sampler_.epoch(); }
  // Iteration number the next IterationPlanned must carry.
  int64_t next_iteration() const { return next_iteration_; }
  // Last planned iteration, -1 before the first.
  int64_t last_iteration() const { return next_iteration_ - 1; }
  // True when no partition of the last planned iteration is in flight.
  bool IterationComplete() const;
  uint64_t next_partition_id() const { return ledger_.last_id() + 1; }
  // The fitted cost model of `node` (scheduler/cost_model.h CostModel).
  CostParams cost(int node) const;
  int64_t observations(int node) const { return observations_[node]; }
  // Done acks whose timings were negative or not finite: the samples are
  // committed but the timings are not fed to the cost model or policy.
  int64_t rejected_observations() const { return rejected_observations_; }
  // Done acks (delta exchange only) whose reads ran during their worker's
  // exchange (PartitionTimings.read_during_exchange): their read times are
  // left out of the cost models' read fits; compute still counts.
  int64_t reads_left_out_of_fits() const { return reads_left_out_of_fits_; }
  // Iterations planned by the even fallback because the policy returned an
  // error or an invalid plan (IterationPlanned.policy_error).
  int64_t policy_failures() const { return policy_failures_; }
  // Samples whose records keep failing their check (scheduler/quarantine.h).
  const SampleQuarantine& quarantine() const { return quarantine_; }
  // Local steps done but not committed: their round's exchange has not
  // applied them yet (round-level lineage, above). Ascending ids.
  const std::set<uint64_t>& round_pending_ids() const { return round_pending_; }
  int64_t round_pending() const { return static_cast<int64_t>(round_pending_.size()); }

  // Evicted nodes (WorkerEvicted): dead for good; a sample every holder of
  // which is evicted is left out of every epoch as unavailable.
  bool evicted(int node) const { return !evicted_.empty() && evicted_[node]; }
  // Sample-epochs left out because every holder of the sample was evicted.
  int64_t lost_to_eviction() const { return lost_to_eviction_; }
  // Sample-epochs left out of their epoch after the wait for their dead
  // holders expired (HoldersAbandoned; scheduler/holder_wait.h).
  int64_t held_out() const { return held_out_; }
  // Every sample-epoch left out, never committed: quarantined, lost to an
  // eviction, held out.
  int64_t unavailable() const { return quarantine_.unavailable() + lost_to_eviction_ + held_out_; }
  // When `node` was last declared dead (WorkerDead.now_ms; 0 if never).
  double dead_since_ms(int node) const { return dead_since_ms_[node]; }
  // Pooled samples of the open epochs that no live node holds.
  int64_t CountHeldOnlyByDeadNodes() const;
  // The iteration counter when the last HoldersAbandoned applied (-1:
  // never); a next one needs an iteration planned since (so an epoch whose
  // samples are all held by dead nodes is not left out epoch after epoch
  // with nothing trained).
  int64_t abandoned_at_iteration() const { return abandoned_at_iteration_; }

  // Whether node `node`'s agent serves decoded samples (its last
  // RegisterRequest.serves_decoded; loft-sim's agents do). Not journaled:
  // agents register again after a scheduler restart. dataset.decode_placement
  // auto is planned only while every live node does (BuildPlanRequest).
  void SetServesDecoded(int node, bool serves) {
    if (node >= 0 && static_cast<size_t>(node) < serves_decoded_.size())
      serves_decoded_[static_cast<size_t>(node)] = serves;
  }
  bool serves_decoded(int node) const {
    return node >= 0 && static_cast<size_t>(node) < serves_decoded_.size() &&
           serves_decoded_[static_cast<size_t>(node)];
  }

  // Nodes no other worker reads from (SourceDistrusted updates).
  bool distrusted(int node) const { return !distrusted_.empty() && distrusted_[node]; }
  // Empty until the first SourceDistrusted, then one entry per node.
  const std::vector<bool>& distrusted_mask() const { return distrusted_; }
  // Samples committed whose source was a distrusted node (which, after
  // its distrust, serves only itself: these were trained on its word
  // alone, like any member's own reads, bounded by the reducers, not by
  // the dataset manifest).
  int64_t distrusted_reads_committed() const { return distrusted_reads_committed_; }

  // Deterministic JSON of the whole state (membership, costs, sampler
  // digest and counts, ledger, counters) and its 64-bit FNV-1a digest.
  std::string ToJson() const;
  uint64_t Digest() const;

  // Snapshots (scheduler/state_snapshot.cc; the journal stores them,
  // scheduler/journal.h). ToSnapshot: everything Apply built (membership,
  // cost models, sampler, ledger, quarantine, distrust, pending
  // observations, counters) plus the policy's memory (Policy::SaveMemory).
  // O(samples + partitions held); not for every update.
  loft::v1::StateSnapshot ToSnapshot() const;
  // Restores a snapshot into a state that was just created (nothing
  // applied) with the same spec, policy and options: afterwards ToJson(),
  // Digest() and every later decision equal those of the state that took
  // it. FailedPrecondition when this state is not fresh or the snapshot
  // was taken for another job id, policy, spec size, seed or global batch
  // (naming it); DataLoss naming the part when the snapshot's contents are
  // inconsistent. On an error the state must be discarded.
  Status RestoreSnapshot(const loft::v1::StateSnapshot& snapshot);

  ~SchedulerState();
  SchedulerState(const SchedulerState&) = delete;
  SchedulerState& operator=(const SchedulerState&) = delete;

 private:
  SchedulerState(const ClusterSpec& spec, Placement placement, std::unique_ptr<Policy> policy,
                 StateOptions options);
  Status ApplyMembership(int32_t node, int64_t view, bool registered_event, bool alive);
  Status ApplyIterationPlanned(const loft::v1::IterationPlanned& u);
  Status ApplyDone(const loft::v1::PartitionDoneUpdate& u);
  Status ApplyFailed(uint64_t id, int32_t attempt, int32_t node, double now_ms, bool timed_out,
                     std::span<const uint64_t> bad_samples = {});
  // Commits the samples of done partition `p` in its epoch.
  Status CommitSamples(const loft::v1::Partition& p);
  // Returns the samples of failed partition `id` to its epoch's pool (as
  // its children's), setting aside those quarantined or lost to eviction.
  Status ReturnToPool(uint64_t id, std::span<const uint64_t> bad_samples);
  // Round-level lineage (above): commits (applied) or fails `worker`'s
  // pending local steps of iterations before `before_iteration`; worker < 0:
  // every worker's.
  Status ResolveRound(int32_t worker, int64_t before_iteration, bool applied, double now_ms);
  // The done partition `rec` under round-level lineage: commits it and its
  // worker's pending steps, holds it pending, or fails its round.
  Status CommitOrHold(const PartitionRecord& rec, const loft::v1::PartitionDone& d, double now_ms);
  // After a round-ending step of `iteration` finished: once the iteration
  // is closed, fails the pending steps its exchange did not confirm.
  Status MaybeCloseRound(const loft::v1::Partition& p, double now_ms);
  // Snapshot part: the pending ids, checked against the ledger and samplers.
  Status RestoreRoundPending(const loft::v1::StateSnapshot& s);
  // Takes a pooled sample out of `s`'s pool as unavailable (committed in
  // the sampler, not in the ledger); the caller counts it.
  Status SetAside(EpochSampler& s, uint64_t id);
  // Sets aside every pooled sample of `es` with pred(id), adding how many
  // to *counter.
  Status SetAsideWhere(EpochSampler& es, const std::function<bool(uint64_t)>& pred, int64_t* counter);
  bool LostToEviction(uint64_t id) const;  // every holder evicted
  bool HeldOnlyByDeadNodes(uint64_t id) const;
  Status ApplyWorkerEvicted(const loft::v1::WorkerEvicted& u);
  Status ApplyHoldersAbandoned(const loft::v1::HoldersAbandoned& u);
  // The open epoch `epoch`'s sampler (current or previous), else null.
  EpochSampler* SamplerOfEpoch(int64_t epoch);
  EpochSampler& planning_sampler_mut() { return const_cast<EpochSampler&>(planning_sampler()); }
  // Drops the previous epoch once its last sample is committed.
  void RetirePreviousEpochIfDone();
  Status ApplyEpochAdvanced(const loft::v1::EpochAdvanced& u);
  Status ApplySourceDistrusted(const loft::v1::SourceDistrusted& u);
  void MaybeDeliverObservations(int64_t iteration);
  // ProposeIteration's phases:
  // The policy's plan of `req`, or (its error in *policy_error, logged at
  // the 1st, 2nd, 4th ... failure) an even split.
  Plan PlanOrEvenSplit(const PlanRequest& req, std::string* policy_error);
  // The partitions of assignment `a` (one per worker and origin) into *ip.
  void AddPlannedPartitions(const Assignment& a, const PlanRequest& req, const EpochSampler& sampler,
                            const ExchangeDecision& xd, double now_ms, loft::v1::IterationPlanned* ip) const;
  // RestoreSnapshot's phases (state_snapshot.cc):
  // OkStatus when `s` was taken by a state created alike and its node entries fit this spec.
  Status CheckSnapshotFits(const loft::v1::StateSnapshot& s) const;
  // Every node's membership, distrust, eviction and cost model.
  Status RestoreNodes(const loft::v1::StateSnapshot& s);
  // The observations of the iterations not finished yet.
  Status RestorePendingObservations(const loft::v1::StateSnapshot& s);
  bool Assignable(uint64_t id) const;

  ClusterSpec spec_;
  Placement placement_;
  std::unique_ptr<Policy> policy_;
  StateOptions options_;
  int64_t global_batch_ = 0;
  EpochSampler sampler_;
  std::unique_ptr<EpochSampler> prev_;  // previous epoch, while open (see above)
  Ledger ledger_;
  ExchangePlan exchange_;
  struct CostModels;  // one CostModel per node (pimpl: keeps cost_model.h private)
  std::unique_ptr<CostModels> cost_models_;
  CostModel& cost_model(int node) const;  // cost_models_'s, for state_snapshot.cc
  std::vector<int64_t> observations_;
  int64_t rejected_observations_ = 0;
  int64_t reads_left_out_of_fits_ = 0;
  int64_t policy_failures_ = 0;
  std::vector<bool> distrusted_;  // empty: none (keeps ToJson/Digest of runs without any unchanged)
  int64_t distrusted_reads_committed_ = 0;
  SampleQuarantine quarantine_;
  std::set<uint64_t> round_pending_;  // done local steps awaiting their round (above)
  std::vector<bool> evicted_;         // empty: none (keeps ToJson/Digest of runs without any unchanged)
  int64_t lost_to_eviction_ = 0;
  int64_t held_out_ = 0;
  int64_t abandoned_at_iteration_ = -1;
  std::vector<double> dead_since_ms_;
  std::vector<bool> registered_;
  std::vector<bool> alive_;
  std::vector<bool> serves_decoded_ = std::vector<bool>(static_cast<size_t>(spec_.num_nodes()), false);
  int64_t view_ = 0;
  int64_t next_iteration_ = 0;
  // Observations of partitions done in each not-yet-finished iteration,
  // merged per node; handed to Policy::Observe when the iteration closes.
  // Per iteration: one slot per node (dense, so a done ack allocates
  // nothing) plus the nodes present, in arrival order.
  struct PendingObservations {
    std::vector<Observation> by_node;  // by_node[n].node == -1: none from n yet
    std::vector<int32_t> nodes;
    // Present nodes in ascending order (the order Observe and ToJson use).
    std::vector<int32_t> SortedNodes() const;
  };
  std::map<int64_t, PendingObservations> pending_observations_;
  // ApplyIterationPlanned's buffers (all sample ids of the update and
  // their sources), kept to avoid reallocating them every iteration.
  std::vector<uint64_t> apply_ids_;
  std::vector<int32_t> apply_sources_;
};

}  // namespace loft::sched
