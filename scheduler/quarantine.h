// SampleQuarantine: samples whose stored record keeps failing its check.
//
// A worker whose cached record of a sample fails its CRC (or does not
// decode), or whose serving peer refuses it for that reason, fails the
// partition and names the sample in PartitionFailed.bad_samples. With
// replication 1 no other node can read it, so retrying the partition would
// fail forever and the epoch would never complete. So a sample is
// quarantined: it leaves the pool as `unavailable` (never committed) in
// this and every later epoch, so the epoch completes without it. The rest
// of its partition is retried.
//
// A report is an accusation, not proof: a Byzantine worker can fail its own
// partitions naming good samples, and a Byzantine serving peer can make
// honest readers report a copy that only it spoiled. So reports are counted
// by who made them and whose copy they read: each report is a (reporter,
// holder) pair (the partition's worker; the node it read the record from,
// itself for a local read). A sample is quarantined only once
//   - `after` distinct reporters named it, and
//   - the copies of min(`after`, the sample's holders) distinct holders
//     were reported (every holder's copy with replication < after).
// One worker naming a sample any number of times, or any number of workers
// reading one holder's copy while the sample has other holders, quarantines
// nothing. The assigner (scheduler/assigner.h) spreads a reported sample:
// it reads it from a holder whose copy was not reported where one is live,
// and gives it to a worker that has not reported it where it can, so a
// genuinely corrupt record still gathers its distinct reports.
//
// Part of SchedulerState, changed only by its Apply (the reports travel in
// the journaled PartitionFailedUpdate), so replay rebuilds it exactly.
//
// Not responsible for: the sampler's pool (SchedulerState moves a
// quarantined sample out of it), reading records (agents), which reports
// are accepted (the ledger: only a partition's open attempt, from its
// worker).
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "core/status.h"

namespace loft::sched {

class SampleQuarantine {
 public:
  // What is known about a sample named but not (yet) quarantined.
  struct Pending {
    int32_t reports = 0;             // accepted reports naming it
    std::vector<int32_t> reporters;  // distinct, ascending
    std::vector<int32_t> holders;    // distinct, ascending: whose copies were reported
  };

  // after = 0: never quarantine.
  explicit SampleQuarantine(int32_t after) : after_(after) {}

  // One accepted failure report naming `id`: `reporter` read its record
  // from `holder` (== reporter for a local read); `holders` nodes hold it.
  // True when this report quarantines it (see the rule above).
  bool Report(uint64_t id, int32_t reporter, int32_t holder, int holders);
  bool quarantined(uint64_t id) const { return quarantined_.count(id) != 0; }
  const std::set<uint64_t>& samples() const { return quarantined_; }
  // Failure reports so far for a sample that is not (yet) quarantined.
  int32_t reports(uint64_t id) const;
  // The pending entry of `id`, or null (never named, or quarantined).
  const Pending* pending(uint64_t id) const;
  // True when some sample is named but not quarantined (the assigner's
  // per-sample lookups are skipped otherwise).
  bool any_pending() const { return !reports_.empty(); }
  // Sample-epochs left out as unavailable (a sample quarantined for three
  // epochs counts three times).
  int64_t unavailable() const { return unavailable_; }
  void CountUnavailable(int64_t n) { unavailable_ += n; }
  int32_t after() const { return after_; }
  // The samples not (yet) quarantined (what a snapshot stores).
  const std::map<uint64_t, Pending>& pending_reports() const { return reports_; }
  // Replaces the contents (a snapshot's restore). InvalidArgument, and
  // nothing changed, when an entry has no reporter or holder, lists one
  // twice or unsorted, has fewer reports than reporters, a sample is both
  // pending and quarantined, or unavailable < 0.
  Status Restore(std::map<uint64_t, Pending> reports, std::set<uint64_t> quarantined, int64_t unavailable);

 private:
  int32_t after_;
  std::map<uint64_t, Pending> reports_;  // not yet quarantined
  std::set<uint64_t> quarantined_;
  int64_t unavailable_ = 0;
};

}  // namespace loft::sched
