// Ledger: partitions and their lineage.
//
// A partition is {id, job, epoch, iteration, worker, attempt, parent,
// sample ids, sources, plan id} (loft.v1.Partition). States:
//   planned -> sent -> done | failed | timed_out
// (done/failed may also arrive straight from planned). A failed or
// timed-out partition's samples go back to the epoch pool (the caller,
// SchedulerState, does that with the ids the Ledger hands back); later
// plans take them as child partitions (attempt = parent attempt + 1,
// parent = the failed partition's id).
//
// Acks are idempotent: a second Done for a done partition is ignored.
// An ack for an unknown partition, for a terminal (failed / timed out /
// done) partition, with a different attempt, or from a node that is not
// the partition's worker is ignored and counted (acks_ignored).
//
// Not responsible for: which samples are pooled (EpochSampler), planning,
// time (deadlines and times come in as arguments).
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::sched {

enum class PartitionState : uint8_t { kPlanned, kSent, kDone, kFailed, kTimedOut };
std::string_view PartitionStateName(PartitionState s);
inline bool IsTerminal(PartitionState s) {
  return s == PartitionState::kDone || s == PartitionState::kFailed || s == PartitionState::kTimedOut;
}

struct PartitionRecord {
  loft::v1::Partition partition;
  PartitionState state = PartitionState::kPlanned;
  double planned_ms = 0;
  double sent_ms = 0;
  double finished_ms = 0;
  double deadline_ms = 0;  // 0 = never times out
};

struct LedgerCounters {
  int64_t partitions = 0;         // created
  int64_t retries = 0;            // child partitions created (attempt > 0)
  int64_t samples_committed = 0;  // over all epochs
  int64_t duplicates = 0;         // a sample committed twice in an epoch (must stay 0)
  int64_t lost = 0;               // samples uncommitted when their epoch ended (must stay 0)
  int64_t failed = 0;             // partitions failed
  int64_t timed_out = 0;          // partitions timed out
  int64_t acks_ignored = 0;       // done/failed/timeout for unknown, terminal or superseded attempts
  int64_t epochs_completed = 0;
};

// Why an ack was accepted or ignored.
enum class AckOutcome : uint8_t { kAccepted, kDuplicate, kUnknown, kTerminal, kWrongAttempt, kWrongNode };
std::string_view AckOutcomeName(AckOutcome o);

class Ledger;
// Whether a PartitionDone / PartitionFailed of `node` for (id, attempt)
// changes scheduler state: the partition is known, open, that attempt,
// that worker. Reports that would not are counted and dropped by the
// daemon instead of being journaled (a JobDriver call would ignore them).
bool WouldApply(const Ledger& ledger, uint64_t partition_id, int32_t attempt, int32_t node);
// The same for a record the caller already looked up (null = unknown).
bool WouldApply(const PartitionRecord* record, int32_t attempt, int32_t node);

class Ledger {
 public:
  // Records a new partition in state planned. Errors: id 0, id not
  // greater than every earlier id, sources not parallel to sample_ids.
  Status AddPlanned(const loft::v1::Partition& p, double now_ms, double deadline_ms);
  // planned -> sent. Stale or unknown ids are ignored (returns the outcome).
  AckOutcome MarkSent(uint64_t id, int32_t attempt, double now_ms);
  // -> done. On kAccepted the caller commits the partition's sample ids
  // (Find(id)->partition.sample_ids).
  AckOutcome MarkDone(uint64_t id, int32_t attempt, int32_t node, double now_ms);
  // -> failed (node < 0: any node, used when the scheduler declares the
  // worker dead). On kAccepted the caller returns the samples to the pool.
  AckOutcome MarkFailed(uint64_t id, int32_t attempt, int32_t node, double now_ms);
  // -> timed_out. On kAccepted the caller returns the samples to the pool.
  AckOutcome MarkTimedOut(uint64_t id, int32_t attempt, double now_ms);
  // done -> failed for a local step whose round was never applied
  // (round-level lineage, SchedulerState): its worker acked it, but the
  // exchange that would have carried its samples into the agreed model did
  // not happen. Counted as failed. False (nothing changed) unless `id` is a
  // done record. now_ms < 0 keeps the record's finished time. The caller
  // returns the samples to the pool.
  bool MarkRoundLost(uint64_t id, double now_ms);

  const PartitionRecord* Find(uint64_t id) const;
  // Non-terminal partitions, ascending id.
  std::vector<uint64_t> InFlight() const;
  std::vector<uint64_t> InFlightOf(int32_t worker) const;
  // Non-terminal partitions with 0 < deadline_ms <= now_ms, ascending id.
  std::vector<uint64_t> Expired(double now_ms) const;
  // Non-terminal partitions of `iteration`.
  int64_t OpenInIteration(int64_t iteration) const;
  int64_t in_flight() const { return static_cast<int64_t>(open_.size()); }

  // Drops terminal partitions of epochs < `epoch` (bounded memory).
  void PruneBefore(int64_t epoch);
  // Adds `n` to `lost` (the caller found uncommitted samples at an epoch end).
  void CountLost(int64_t n) { counters_.lost += n; }
  void CountEpochCompleted() { ++counters_.epochs_completed; }
  void CountCommitted(int64_t n, int64_t duplicates) {
    counters_.samples_committed += n;
    counters_.duplicates += duplicates;
  }
  void CountIgnoredAck() { ++counters_.acks_ignored; }

  const LedgerCounters& counters() const { return counters_; }
  // Partition records held (not pruned).
  int64_t size() const { return static_cast<int64_t>(records_.size()) - pruned_in_place_; }
  uint64_t last_id() const { return last_id_; }

  // Deterministic JSON of every partition record and counter.
  std::string ToJson() const;

  // Every record held (not pruned), ascending id (what a snapshot stores).
  void ForEachRecord(const std::function<void(const PartitionRecord&)>& fn) const;
  // Replaces an EMPTY ledger's contents with `records` (ascending ids,
  // none pruned), `counters` and `last_id` (the open-partition indexes are
  // rebuilt). FailedPrecondition when the ledger is not empty;
  // InvalidArgument, and nothing changed, when ids are 0, not ascending or
  // above last_id, sources are not parallel to sample ids, a state is out
  // of range or a time (planned, sent, finished, deadline) is not finite.
  Status Restore(std::vector<PartitionRecord> records, const LedgerCounters& counters, uint64_t last_id);

 private:
  AckOutcome Check(uint64_t id, int32_t attempt, int32_t node, PartitionRecord** rec);
  void Finish(PartitionRecord& rec, PartitionState s, double now_ms);

  PartitionRecord* FindMutable(uint64_t id);

  // Records in ascending id order (ids only grow, so AddPlanned appends).
  // Pruning pops from the front; a pruned record that is not at the front
  // stays as a tombstone (partition.id() == 0) until it reaches it. A
  // deque keeps pointers from Find valid across AddPlanned and pruning of
  // other records.
  std::deque<PartitionRecord> records_;
  int64_t pruned_in_place_ = 0;                   // tombstones in records_
  std::map<uint64_t, int64_t> open_;              // non-terminal id -> iteration
  std::map<int64_t, int64_t> open_by_iteration_;  // iteration -> open count
  LedgerCounters counters_;
  uint64_t last_id_ = 0;
};

}  // namespace loft::sched
