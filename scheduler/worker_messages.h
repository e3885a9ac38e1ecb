// What the scheduler does with a worker's heartbeat, credit grant and the
// votes of its ack: one rule each, the daemon converting messages into
// calls (server/service.cc) and loft-sim running the ack's votes.
//  - A Heartbeat is refused when its node was evicted by its ring
//    (PermissionDenied, checked first: an evicted node never comes back),
//    when the node has no session (FailedPrecondition: it registers
//    again), or when its credits are outside 0..kMaxCredits
//    (InvalidArgument).
//  - A CreditGrant is refused when the node has no session, or its
//    credits are outside 1..kMaxCredits. (An evicted node has no session
//    left to grant on.)
//  - A node the state counts dead that is heard from again (an admitted
//    heartbeat) comes back: JobDriver::OnWorkerAlive (a new view).
//  - An ack's training report is the worker's word on what its ring
//    applied. It votes (RingCommitter::RecordVotes, for the partition's
//    iteration) when the ack is the worker's report of its open attempt
//    (WouldApply), and also when it changes nothing but is about a
//    partition of that worker (the ring may have committed it on the
//    worker's behalf). Recorded before the ack is applied: an epoch's last
//    ack prunes the records the votes are checked against.
//  - A registration that is not a reconnect (the engine decides that from
//    its sessions): when the node is alive, each of its partitions in
//    flight the ring applied is committed on its worker's behalf first
//    (the engine's `commit`, ring_commit.h); then JobDriver::
//    RegisterWorker fails the rest and opens a new view.
//
// Not responsible for: authentication and sessions (the engine says
// whether the node is registered), credit windows, journaling, logs.
// Thread-safety: plain functions over the caller's objects.
#pragma once

#include <cstdint>
#include <functional>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/accusations.h"
#include "scheduler/driver.h"
#include "scheduler/ring_committer.h"

namespace loft::sched {

// Whether a Heartbeat of `node` carrying `credits` is taken (the first
// point above); OkStatus when it is.
Status AdmitHeartbeat(const SchedulerState& state, const AccusationBook& accusations, int32_t node,
                      bool registered, int64_t credits);

// Whether a CreditGrant of `node` carrying `credits` is taken.
Status AdmitCreditGrant(const SchedulerState& state, int32_t node, bool registered, int64_t credits);

// `node`, heard from again, comes back if the state counts it dead: the
// driver's updates (empty when it was alive).
StatusOr<Updates> ComeBackIfDead(JobDriver& driver, int32_t node, double now_ms);

struct AckVotes {
  bool applies = false;  // WouldApply: the ack changes state
  bool voted = false;    // its training report was recorded
  int dropped = 0;       // applied pairs dropped (RingCommitter::RecordVotes)
};

// The ack `d` of `node`: whether it applies, and its votes recorded by
// the rule above.
AckVotes RecordAckVotes(RingCommitter& ring, const Ledger& ledger, int32_t node, const v1::PartitionDone& d);

// The registration rule above for `node` at now_ms: the driver's updates.
StatusOr<Updates> Register(JobDriver& driver, const RingCommitter& ring, int32_t node, double now_ms,
                           const std::function<Status(uint64_t)>& commit);

}  // namespace loft::sched
