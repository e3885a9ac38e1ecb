// PoisonReports: what the scheduler knows about peers that served forged
// samples. An agent that refuses peer-fetched samples because their digest
// does not match the dataset manifest (edge_agent/sample_guard.h) names the
// serving peers in PartitionFailed.poisoned_by / poisoned_samples; this
// class validates and counts those reports (per accused peer and per
// (reporter, peer) pair) and exports loft_scheduler_poisoned_samples_total
// {peer}. The counts appear in the status JSON ("poisoning") and in
// `loftctl cluster run`'s summary.json.
//
// A report counts only for a partition the ledger knows, sent by that
// partition's worker, against peers that were sources of that partition:
// a made-up partition id accuses nobody (with f = 0 one such report would
// otherwise distrust a peer for good).
//
// Reports are evidence, not proof: the scheduler never sees the forged
// record, and a Byzantine reporter can accuse an honest peer. The rule
// (ShouldDistrust): a peer reported by f+1 distinct nodes (f =
// training.byzantine_tolerance) served forged samples to at least one
// honest node, so f liars cannot make the scheduler distrust an honest
// peer. The service then journals a SourceDistrusted update: the planner
// stops reading from the peer for other workers (scheduler/assigner.h);
// the peer is not evicted (it stays a worker, its gradients bounded by the
// reducers like any member's). Refused samples are retried, as for any
// failed partition.
//
// Not responsible for: the manifest itself (cache/manifest.h; the server
// loads it and sends it in RegisterReply), retries (the ledger).
// Thread-safety: not thread-safe; the scheduler's poll thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/ledger.h"

namespace loft::sched {

class PoisonReports {
 public:
  // registry may be null (no metric).
  static StatusOr<PoisonReports> Create(metrics::Registry* registry);

  // Records the poisoning report of `failed`, sent by node `reporter` (the
  // authenticated sender) in a cluster of `num_nodes`; `partition` is the
  // ledger's record of failed.partition_id() (null when the ledger does not
  // know it). Returns one line per accepted accusation (for the log).
  // A report about a partition that is unknown or not the reporter's is
  // ignored whole and counted (ignored_reports()): it accuses nobody. An
  // entry naming a peer that served none of the partition's samples, a
  // peer out of range, the reporter itself, a count < 1 or a count list of
  // another length is skipped. Both are named in `*rejected` (may be null).
  std::vector<std::string> Record(int32_t reporter, const v1::PartitionFailed& failed, int32_t num_nodes,
                                  const PartitionRecord* partition,
                                  std::vector<std::string>* rejected = nullptr);
  // Reports ignored whole (unknown partition, or another worker's).
  int64_t ignored_reports() const { return ignored_; }

  // Distinct nodes that reported `peer`.
  int32_t reporters(int32_t peer) const;
  // True when `peer` has been reported by at least f+1 distinct nodes.
  bool ShouldDistrust(int32_t peer, int tolerance) const { return reporters(peer) >= tolerance + 1; }
  // Counts a peer the scheduler stopped reading from
  // (loft_scheduler_distrusted_sources_total).
  void CountDistrusted(int32_t peer);

  int64_t total_samples() const { return total_; }
  int64_t reports() const { return reports_; }
  const std::map<int32_t, int64_t>& samples_by_peer() const { return by_peer_; }
  // (reporter, peer) -> samples
  const std::map<std::pair<int32_t, int32_t>, int64_t>& samples_by_pair() const { return by_pair_; }

 private:
  metrics::CounterFamily* counter_ = nullptr;
  metrics::CounterFamily* distrusted_counter_ = nullptr;
  int64_t total_ = 0;
  int64_t reports_ = 0;
  int64_t ignored_ = 0;
  std::map<int32_t, int64_t> by_peer_;
  std::map<std::pair<int32_t, int32_t>, int64_t> by_pair_;
};

// The distrust rule after `reports` recorded `failed`: each peer it names,
// in range (0..num_nodes-1), not yet distrusted and reported by f+1
// distinct nodes (ShouldDistrust, f = `tolerance`), stops being a source
// (JobDriver::DistrustSource). For each that changed the state,
// `distrusted(peer, reporters, updates)` gets the driver's updates (the
// engine records and logs them), then the peer is counted
// (CountDistrusted). Stops at the first error.
Status DistrustReported(JobDriver& driver, PoisonReports& reports, const v1::PartitionFailed& failed,
                        int tolerance, double now_ms,
                        const std::function<Status(int32_t, int32_t, Updates&&)>& distrusted);

}  // namespace loft::sched
