// Departures: which members leave at a tick, and the one way they leave.
// One rule for the daemon's Tick and, for deaths, loft-sim (which has no
// ring accusations and declares a death at the time HeartbeatExpiresAt
// gives, liveness.h).
//  - A member the AccusationBook evicted (accusations.h) and the state has
//    not yet evicted leaves for good (kEvicted), whether or not it is
//    still alive; otherwise a live member silent for more than the
//    heartbeat timeout (HeartbeatExpired) is dead (kDead).
//  - Before a live member leaves, each partition in flight its departure
//    would fail (AffectedPartitions) that its ring applied
//    (RingCommitter::CommitVotes > 0) is committed on its worker's behalf
//    (the engine's `commit`, in ledger order); then the driver fails the
//    rest (JobDriver::OnWorkerDead) or evicts it (OnWorkerEvicted).
//  - Nodes are visited in ascending order, each with the state its
//    predecessors' departures left.
//
// Not responsible for: clocks (now_ms and last-seen times come in),
// sessions, send queues and credit windows, views (the engine's
// `departed` callback), logs.
// Thread-safety: plain functions over the caller's objects.
#pragma once

#include <cstdint>
#include <functional>

#include "core/status.h"
#include "scheduler/accusations.h"
#include "scheduler/driver.h"
#include "scheduler/ring_committer.h"

namespace loft::sched {

enum class Departure : uint8_t { kStays, kDead, kEvicted };

// Whether `node` leaves at now_ms (the rule's first point).
Departure DepartureOf(const SchedulerState& state, const AccusationBook& accusations, int32_t node,
                      double last_seen_ms, double now_ms, int64_t heartbeat_timeout_ms);

// `commit(id)` for each partition in flight that `node`'s departure would
// fail and its ring applied, in ledger order; stops at the first error.
Status CommitAppliedBeforeDeparture(const Ledger& ledger, const RingCommitter& ring, int32_t node,
                                    const std::function<Status(uint64_t)>& commit);

// `node` leaves as `why` (not kStays): the ring's commits when it is
// alive, then the driver's updates, which are returned (the engine
// records them). `reason` goes to the driver.
StatusOr<Updates> Depart(JobDriver& driver, const RingCommitter& ring, int32_t node, Departure why,
                         std::string_view reason, double now_ms,
                         const std::function<Status(uint64_t)>& commit);

struct DepartureCallbacks {
  // The last time each node was heard from.
  std::function<double(int32_t)> last_seen_ms;
  // Before anything changes for a leaving node (the engine's log line).
  std::function<void(int32_t, Departure)> leaving;
  // A ring-applied partition to commit on its worker's behalf.
  std::function<Status(uint64_t)> commit;
  // After the driver's call: its updates, and the samples its eviction
  // left out (SchedulerState::lost_to_eviction's growth; 0 for a death).
  std::function<Status(int32_t, Departure, Updates&&, int64_t)> departed;
};

// The whole rule at now_ms, every node in ascending order.
Status DepartAt(JobDriver& driver, const AccusationBook& accusations, const RingCommitter& ring,
                double now_ms, int64_t heartbeat_timeout_ms, const DepartureCallbacks& cb);

}  // namespace loft::sched
