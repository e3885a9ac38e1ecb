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
