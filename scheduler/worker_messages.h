// What the scheduler does with a worker's registration, heartbeat, credit
// grant and the votes of its ack: one rule each, the daemon converting
// messages into calls (server/service.cc) and loft-sim running the
// registration (its nodes' first and their returns after an outage) and
// the ack's votes.
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
//  - A RegisterRequest is refused when its credits are outside
//    1..kMaxCredits (InvalidArgument), then when its node was evicted
//    (PermissionDenied). It is a reconnect when the same agent process
//    registers again while its session is live: a non-zero incarnation
//    equal to the session's, the session connected, the node alive, and
//    the same peer and ring endpoints. A reconnect changes nothing: its
//    partitions keep running, nothing fails, the view is unchanged, and
//    RegisterBackoff does not count it. Anything else is a new session
//    (a new agent process, or one the scheduler had dropped): refused
//    while RegisterBackoff makes the node wait (the engine tells the
//    agent to retry after the wait); else, when the node is alive, each
//    of its partitions in flight the ring applied is committed on its
//    worker's behalf first (the engine's `commit`, ring_commit.h); then
//    JobDriver::RegisterWorker fails the rest (a live node's own
//    partitions only: those reading from it fail by their workers'
//    reports) and opens a new view (a dead node comes back with it).
//
// Not responsible for: authentication, the endpoints' form
// (server/endpoint_check.h) and sessions (the engine holds them and says
// whether the node is registered), credit windows and send queues,
// journaling, replies, logs.
// Thread-safety: plain functions over the caller's objects.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/accusations.h"
#include "scheduler/driver.h"
#include "scheduler/register_backoff.h"
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

// A node's session as its engine holds it (the daemon's NodeSession;
// loft-sim's agent process).
struct Session {
  bool connected = false;    // registered, and not dropped since
  uint64_t incarnation = 0;  // the registering process's RegisterRequest.incarnation (0 = unknown)
  std::string peer_endpoint;
  std::string ring_endpoint;
};

// Whether `req` of `node` is a reconnect of `session` (the rule above).
bool IsReconnect(const SchedulerState& state, int32_t node, const Session& session,
                 const v1::RegisterRequest& req);

// What a registration did.
struct Registration {
  double wait_ms = 0;      // > 0: refused by RegisterBackoff, nothing changed; retry after wait_ms
  bool reconnect = false;  // nothing changed; the engine keeps the session
  Updates updates;         // a new session's (the driver's); empty otherwise
};

// The registration rule above for `node`'s `req` at now_ms, its engine
// holding `session`: refused (the errors above, or wait_ms; no state
// changed), a reconnect, or a new session (Register below), for which the
// engine then opens the node's credit window with req.credits() and
// starts its session.
StatusOr<Registration> TakeRegistration(JobDriver& driver, const RingCommitter& ring,
                                        const AccusationBook& accusations, RegisterBackoff& backoff,
                                        int32_t node, const Session& session, const v1::RegisterRequest& req,
                                        double now_ms, const std::function<Status(uint64_t)>& commit);

// A new session of `node` at now_ms (the last steps of the rule above,
// once admitted): the ring's commits, then the driver's updates.
StatusOr<Updates> Register(JobDriver& driver, const RingCommitter& ring, int32_t node, double now_ms,
                           const std::function<Status(uint64_t)>& commit);

}  // namespace loft::sched
