#include "scheduler/departures.h"

#include "scheduler/liveness.h"

namespace loft::sched {

Departure DepartureOf(const SchedulerState& state, const AccusationBook& accusations, int32_t node,
                      double last_seen_ms, double now_ms, int64_t heartbeat_timeout_ms) {
  if (accusations.evicted(node) && !state.evicted(node)) return Departure::kEvicted;
  if (state.alive(node) && HeartbeatExpired(last_seen_ms, now_ms, heartbeat_timeout_ms))
    return Departure::kDead;
  return Departure::kStays;
}

Status CommitAppliedBeforeDeparture(const Ledger& ledger, const RingCommitter& ring, int32_t node,
                                    const std::function<Status(uint64_t)>& commit) {
  for (uint64_t id : AffectedPartitions(ledger, node)) {
    const PartitionRecord* rec = ledger.Find(id);
    if (rec == nullptr || ring.CommitVotes(*rec) == 0) continue;
    LOFT_RETURN_IF_ERROR(commit(id));
  }
  return OkStatus();
}

StatusOr<Updates> Depart(JobDriver& driver, const RingCommitter& ring, int32_t node, Departure why,
                         std::string_view reason, double now_ms,
                         const std::function<Status(uint64_t)>& commit) {
  if (why == Departure::kStays) return Updates{};
  if (driver.state().alive(node))
    LOFT_RETURN_IF_ERROR(CommitAppliedBeforeDeparture(driver.state().ledger(), ring, node, commit));
  return why == Departure::kEvicted ? driver.OnWorkerEvicted(node, reason, now_ms)
                                    : driver.OnWorkerDead(node, reason, now_ms);
}

Status DepartAt(JobDriver& driver, const AccusationBook& accusations, const RingCommitter& ring,
                double now_ms, int64_t heartbeat_timeout_ms, const DepartureCallbacks& cb) {
  const SchedulerState& st = driver.state();
  for (int32_t node = 0; node < st.spec().num_nodes(); ++node) {
    const Departure why =
        DepartureOf(st, accusations, node, cb.last_seen_ms(node), now_ms, heartbeat_timeout_ms);
    if (why == Departure::kStays) continue;
    cb.leaving(node, why);
    const int64_t lost_before = st.lost_to_eviction();
    LOFT_ASSIGN_OR_RETURN(
        auto u, Depart(driver, ring, node, why,
                       why == Departure::kEvicted ? "evicted: reported by its ring" : "missed heartbeats",
                       now_ms, cb.commit));
    LOFT_RETURN_IF_ERROR(cb.departed(node, why, std::move(u), st.lost_to_eviction() - lost_before));
  }
  return OkStatus();
}

}  // namespace loft::sched
