// EpochSampler: the pool of samples of the current epoch.
//
// Each epoch has a seeded, reproducible permutation of the sample ids
// (SeededPermutation(n, seed ^ EpochMix(epoch))). Every sample is in one
// of three states per epoch: pooled (unconsumed, can be handed out),
// taken (in some partition in flight) or committed (done). Taking always
// picks the pooled sample with the SMALLEST permutation position among
// the candidates, so which sample is taken next is a pure function of the
// pooled set (cursors are only an acceleration and never observable):
// replaying Take/Return/Commit calls in any equivalent order gives the
// same future picks. Samples returned by a failed partition remember that
// partition (origin) so the next plan creates child partitions.
//
// Replication: a sample held by several nodes (Placement::Holders) is one
// entry; taking it removes it for all holders. Per-node pooled counts
// (what PlanRequest.workers[i].local_available reports) are maintained in
// O(replication) per sample taken or returned.
//
// An epoch is done when every sample is committed, not merely taken.
//
// Not responsible for: deciding sizes (Policy), choosing sources
// (Assigner), partition lineage (Ledger), liveness (the caller passes an
// `assignable` predicate where it matters).
// Thread-safety: not thread-safe, not even for concurrent const calls
// (position() fills a per-epoch cache on first use).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "core/placement.h"
#include "core/status.h"

namespace loft::sched {

class EpochSampler {
 public:
  enum class SampleState : uint8_t { kPooled = 0, kTaken = 1, kCommitted = 2 };

  // `placement` must outlive the sampler. Starts epoch 0.
  EpochSampler(const Placement* placement, uint64_t seed);

  // The per-epoch permutation seed: seed ^ EpochMix(epoch).
  static uint64_t EpochMix(int64_t epoch);

  // Resets to a fresh epoch: every sample pooled, origins cleared.
  void StartEpoch(int64_t epoch);
  // Computes `epoch`'s permutation and per-node lists now, into spare
  // buffers, so a later StartEpoch(epoch) only swaps them in (the
  // scheduler calls it while an epoch's last samples are in flight, so
  // the next epoch's first plan does not pay for it). A pure cache:
  // StartEpoch's result is the same either way.
  void PrepareEpoch(int64_t epoch);
  // Moves this sampler's epoch (its pooled/taken/committed states and
  // origins, e.g. the last samples still in flight) into a new sampler
  // that it returns, and starts `next_epoch` here (with PrepareEpoch's
  // buffers when they were made for it). The scheduler holds both while
  // the old epoch's last partitions finish (SchedulerState, "two epochs").
  // Not inside a trial.
  std::unique_ptr<EpochSampler> SplitOffEpoch(int64_t next_epoch);

  int64_t epoch() const { return epoch_; }
  int64_t num_samples() const { return static_cast<int64_t>(state_.size()); }
  int64_t pooled() const { return pooled_; }
  int64_t taken() const { return taken_; }
  int64_t committed() const { return committed_; }
  bool EpochDone() const { return committed_ == num_samples(); }

  SampleState state(uint64_t id) const {
    // Inside a trial, takes clear only the pooled bit (state_ is untouched
    // and RollbackTrial just sets the bits again).
    if (state_[id] == kPooledByte && !IsPooled(id)) return SampleState::kTaken;
    return static_cast<SampleState>(state_[id]);
  }
  // Pooled samples of this epoch held by `node` (overlapping between
  // holders when replication > 1).
  int64_t available(int node) const { return available_[node]; }
  // Permutation position of `id` in this epoch.
  int64_t position(uint64_t id) const {
    EnsurePositions();
    return position_[id];
  }
  // The failed/timed-out partition this pooled sample came back from;
  // 0 = never handed out this epoch (or committed).
  uint64_t origin(uint64_t id) const { return origin_[id]; }
  // Samples of this epoch with a non-zero origin (returned by a failed or
  // timed-out partition and not committed since). 0 means origin(id) == 0
  // for every id, which lets callers skip the per-sample origin lookups.
  int64_t with_origin() const { return with_origin_; }

  // Takes up to `max_count` pooled samples held by `node`, smallest
  // permutation position first, appending them to `out`. Returns how many.
  int64_t TakeHeldBy(int node, int64_t max_count, std::vector<uint64_t>& out);
  // Takes up to `max_count` pooled samples for which `assignable(id)` is
  // true, smallest position first (the epoch's global shuffle order).
  // Pooled samples that are not assignable are skipped and stay pooled.
  // An empty `assignable` means every pooled sample is assignable.
  // With `primary_holders`, Placement::Holders(id)[0] of each taken id is
  // appended to it too (read from a per-position copy kept when the
  // replication is 1, so the caller need not touch Placement per id).
  int64_t TakeInOrder(int64_t max_count, const std::function<bool(uint64_t)>& assignable,
                      std::vector<uint64_t>& out, std::vector<int32_t>* primary_holders = nullptr);
  // Number of pooled samples with assignable(id) true (O(pooled)).
  int64_t CountAssignable(const std::function<bool(uint64_t)>& assignable) const;

  // Marks specific ids taken (replay and the scheduler state's Apply).
  // Error if an id is out of range, listed twice or not pooled; nothing
  // changes then.
  Status MarkTaken(std::span<const uint64_t> ids);
  // The same, with `holders` parallel to `ids` (or empty): holders[k] is a
  // node the caller has checked holds ids[k] (Placement::Holds; not checked
  // again here). With replication 1 it is the only holder, so Placement is
  // not read per id. Error if the sizes differ.
  Status MarkTaken(std::span<const uint64_t> ids, std::span<const int32_t> holders);
  // Undoes a tentative take: ids go back to pooled with their origin
  // unchanged. Error if an id is not taken. (Planning uses the cheaper
  // BeginTrial/RollbackTrial instead.)
  Status Untake(std::span<const uint64_t> ids);

  // Planning dry run. Between BeginTrial() and RollbackTrial() the Take*
  // calls work as usual but are logged; RollbackTrial() restores the
  // sampler exactly (pooled set, counts, cursors, internal indexes) in
  // O(samples taken + index entries touched), i.e. O(B) per plan, not
  // O(samples). Only TakeHeldBy / TakeInOrder may be called inside a
  // trial (MarkTaken/Untake/Return/Commit/StartEpoch are errors or
  // programming bugs there). Nested trials are not supported.
  void BeginTrial();
  void RollbackTrial();
  bool in_trial() const { return trial_; }
  // A failed/timed-out partition's ids go back to the pool with origin
  // `from_partition`. Error if an id is not taken.
  Status Return(std::span<const uint64_t> ids, uint64_t from_partition);
  // Commits taken ids. Ids already committed are counted in
  // `*duplicates` and otherwise ignored; ids that are pooled are an error
  // (checked before anything changes).
  Status Commit(std::span<const uint64_t> ids, int64_t* duplicates);

  // Deterministic 64-bit digest of (epoch, per-sample state, origins).
  uint64_t Digest() const;

  uint64_t seed() const { return seed_; }
  // Sets the sampler to `epoch` with the given per-sample states (one
  // SampleState byte per sample id) and origins ((sample, partition) pairs,
  // ascending sample; absent samples have origin 0): what a snapshot of
  // (epoch, state(id), origin(id)) for every id stored. Digest() and every
  // later pick equal the saved sampler's (the cursors are rebuilt, and are
  // never observable). InvalidArgument, and nothing changed, when the
  // sizes do not match the placement, a state is out of range, or an
  // origin is 0, repeated, out of range or on a committed sample. Not
  // inside a trial.
  Status Restore(int64_t epoch, std::span<const uint8_t> states,
                 std::span<const std::pair<uint64_t, uint64_t>> origins);

 private:
  static constexpr uint8_t kPooledByte = 0;
  bool IsPooled(uint64_t id) const { return (pooled_bits_[id >> 6] >> (id & 63)) & 1; }
  void SetPooledBit(uint64_t id) { pooled_bits_[id >> 6] |= uint64_t{1} << (id & 63); }
  void ClearPooledBit(uint64_t id) { pooled_bits_[id >> 6] &= ~(uint64_t{1} << (id & 63)); }
  // Inverts the permutation into position_ once per epoch, on first use:
  // only Return/Untake, non-empty behind sets and position() need it, so an
  // epoch without failures never pays for it.
  void EnsurePositions() const;
  // Needs EnsurePositions() first.
  void Pool(uint64_t id);
  // `epoch`'s permutation, holder per position (replication 1) and per-node lists.
  void BuildOrder(int64_t epoch, std::vector<uint64_t>& order, std::vector<int32_t>& holder_at,
                  std::vector<std::vector<uint64_t>>& node_order) const;
  // `holder` >= 0: a node known to hold `id` (with replication 1 the only
  // one, so Placement::Holders need not be read).
  void Unpool(uint64_t id, int holder = -1);
  // Bookkeeping for ids whose pooled bits were just cleared, all held by
  // `holder` (state or trial log, counters, available_).
  void UnpoolTaken(std::span<const uint64_t> ids, int holder);
  // Index maintenance that the trial log can undo. set = -1: global_behind_,
  // else node_behind_[set].
  void EraseBehind(int set, int64_t pos);
  void InsertBehind(int set, int64_t pos);
  void TouchNodeCursor(int node);

  const Placement* placement_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  std::vector<uint64_t> order_;            // permutation: position -> id
  std::vector<int32_t> holder_at_;         // replication 1: position -> the holder of order_[position]
  mutable std::vector<int64_t> position_;  // id -> position (valid when positions_ready_)
  mutable bool positions_ready_ = false;
  std::vector<uint8_t> state_;         // id -> SampleState (a trial's takes are not written here)
  std::vector<uint64_t> pooled_bits_;  // id -> pooled, as a bitmap (the hot loops test this)
  std::vector<uint64_t> origin_;       // id -> partition it came back from
  std::vector<int64_t> available_;     // node -> pooled samples held
  int64_t pooled_ = 0, taken_ = 0, committed_ = 0;
  int64_t with_origin_ = 0;
  // Acceleration: global cursor into order_ + pooled positions behind it.
  size_t global_cursor_ = 0;
  std::set<int64_t> global_behind_;
  // Per node: held ids sorted by position, cursor, pooled positions behind.
  std::vector<std::vector<uint64_t>> node_order_;
  std::vector<size_t> node_cursor_;
  std::vector<std::set<int64_t>> node_behind_;
  // PrepareEpoch's buffers (-1: none prepared).
  int64_t prepared_epoch_ = -1;
  std::vector<uint64_t> prepared_order_;
  std::vector<int32_t> prepared_holder_at_;
  std::vector<std::vector<uint64_t>> prepared_node_order_;
  // Trial (dry-run) undo log.
  struct BehindOp {
    int set;
    bool inserted;  // true: inserted during the trial; false: erased
    int64_t pos;
  };
  bool trial_ = false;
  size_t trial_global_cursor_ = 0;
  int64_t trial_pooled_ = 0, trial_taken_count_ = 0;
  std::vector<int64_t> trial_available_;  // available_ at BeginTrial
  std::vector<uint64_t> trial_taken_;
  std::vector<std::pair<int, size_t>> trial_node_cursors_;  // first touch: (node, old cursor)
  std::vector<uint8_t> trial_node_touched_;
  std::vector<BehindOp> trial_ops_;
};

}  // namespace loft::sched
