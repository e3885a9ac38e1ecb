#include "scheduler/worker_messages.h"

#include <string>

#include "scheduler/flow_control.h"
#include "scheduler/ledger.h"

namespace loft::sched {

namespace {

const std::string& NameOf(const SchedulerState& state, int32_t node) {
  return state.spec().nodes[static_cast<size_t>(node)].name;
}

}  // namespace

Status AdmitHeartbeat(const SchedulerState& state, const AccusationBook& accusations, int32_t node,
                      bool registered, int64_t credits) {
  if (accusations.evicted(node))
    return PermissionDenied("node " + NameOf(state, node) + " was evicted (reported by its ring)");
  if (!registered) return FailedPrecondition("node " + NameOf(state, node) + " is not registered; register");
  if (credits < 0 || credits > kMaxCredits) return InvalidArgument("heartbeat credits out of range");
  return OkStatus();
}

Status AdmitCreditGrant(const SchedulerState& state, int32_t node, bool registered, int64_t credits) {
  if (!registered) return FailedPrecondition("node " + NameOf(state, node) + " is not registered; register");
  if (credits <= 0 || credits > kMaxCredits) return InvalidArgument("credit grant out of range");
  return OkStatus();
}

StatusOr<Updates> ComeBackIfDead(JobDriver& driver, int32_t node, double now_ms) {
  if (driver.state().alive(node)) return Updates{};
  return driver.OnWorkerAlive(node, now_ms);
}

AckVotes RecordAckVotes(RingCommitter& ring, const Ledger& ledger, int32_t node, const v1::PartitionDone& d) {
  AckVotes out;
  const PartitionRecord* r = ledger.Find(d.partition_id());
  out.applies = WouldApply(r, d.attempt(), node);
  if (r == nullptr || r->partition.worker() != node || !d.timings().has_training()) return out;
  out.voted = true;
  out.dropped = ring.RecordVotes(ledger, r->partition.iteration(), node, d.timings().training());
  return out;
}

bool IsReconnect(const SchedulerState& state, int32_t node, const Session& session,
                 const v1::RegisterRequest& req) {
  return req.incarnation() != 0 && req.incarnation() == session.incarnation && session.connected &&
         state.alive(node) && req.peer_endpoint() == session.peer_endpoint &&
         req.ring_endpoint() == session.ring_endpoint;
}

StatusOr<Registration> TakeRegistration(JobDriver& driver, const RingCommitter& ring,
                                        const AccusationBook& accusations, RegisterBackoff& backoff,
                                        int32_t node, const Session& session, const v1::RegisterRequest& req,
                                        double now_ms, const std::function<Status(uint64_t)>& commit) {
  if (req.credits() <= 0 || req.credits() > kMaxCredits) {
    return InvalidArgument("register credits must be in 1.." + std::to_string(kMaxCredits));
  }
  if (accusations.evicted(node))
    return PermissionDenied("node " + NameOf(driver.state(), node) + " was evicted (reported by its ring)");
  Registration out;
  out.reconnect = IsReconnect(driver.state(), node, session, req);
  if (out.reconnect) return out;  // not counted by the backoff
  out.wait_ms = backoff.Admit(node, now_ms);
  if (out.wait_ms > 0) return out;
  LOFT_ASSIGN_OR_RETURN(out.updates, Register(driver, ring, node, now_ms, commit));
  return out;
}

StatusOr<Updates> Register(JobDriver& driver, const RingCommitter& ring, int32_t node, double now_ms,
                           const std::function<Status(uint64_t)>& commit) {
  if (driver.state().alive(node)) {
    for (uint64_t id : driver.state().ledger().InFlightOf(node)) {
      const PartitionRecord* rec = driver.state().ledger().Find(id);
      if (rec == nullptr || ring.CommitVotes(*rec) == 0) continue;
      LOFT_RETURN_IF_ERROR(commit(id));
    }
  }
  return driver.RegisterWorker(node, now_ms);
}

}  // namespace loft::sched
