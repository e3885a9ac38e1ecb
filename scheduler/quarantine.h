// SampleQuarantine: samples whose stored record keeps failing its check.
//
// A worker whose cached record of a sample fails its CRC (or does not
// decode) fails the partition and names the sample in
// PartitionFailed.bad_samples. With replication 1 no other node can read
// it, so retrying the partition would fail forever and the epoch would
// never complete. After `after` accepted failure reports naming a sample
// (each failed partition counts once per sample, and only for samples of
// that partition), the sample is quarantined: it leaves the pool as
// `unavailable` (never committed) in this and every later epoch, so the
// epoch completes without it. The rest of its partition is retried.
//
// Part of SchedulerState, changed only by its Apply (the reports travel in
// the journaled PartitionFailedUpdate), so replay rebuilds it exactly.
//
// Not responsible for: the sampler's pool (SchedulerState moves a
// quarantined sample out of it), reading records (agents).
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
  // after = 0: never quarantine.
  explicit SampleQuarantine(int32_t after) : after_(after) {}

  // One accepted failure report naming `id`. True when this report
  // quarantines it (the after-th one).
  bool Report(uint64_t id);
  bool quarantined(uint64_t id) const { return quarantined_.count(id) != 0; }
  const std::set<uint64_t>& samples() const { return quarantined_; }
  // Failure reports so far for a sample that is not (yet) quarantined.
  int32_t reports(uint64_t id) const;
  // Sample-epochs left out as unavailable (a sample quarantined for three
  // epochs counts three times).
  int64_t unavailable() const { return unavailable_; }
  void CountUnavailable(int64_t n) { unavailable_ += n; }
  int32_t after() const { return after_; }
  // Report counts of the samples not (yet) quarantined (what a snapshot stores).
  const std::map<uint64_t, int32_t>& pending_reports() const { return reports_; }
  // Replaces the contents (a snapshot's restore). InvalidArgument, and
  // nothing changed, when a count is not in 1..after-1, a sample is both
  // pending and quarantined, or unavailable < 0.
  Status Restore(std::map<uint64_t, int32_t> reports, std::set<uint64_t> quarantined, int64_t unavailable);

 private:
  int32_t after_;
  std::map<uint64_t, int32_t> reports_;  // not yet quarantined
  std::set<uint64_t> quarantined_;
  int64_t unavailable_ = 0;
};

}  // namespace loft::sched
