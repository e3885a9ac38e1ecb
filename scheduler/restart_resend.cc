#include "scheduler/restart_resend.h"

namespace loft::sched {

int ResendAfterRestart(RestartResend& resend, const Ledger& ledger, SendQueues& sends, RestartHold& hold,
                       const std::function<void(const PartitionRecord&)>& recovered) {
  if (!resend.Take()) return -1;
  int queued = 0;
  for (uint64_t id : ledger.InFlight()) {
    const PartitionRecord* rec = ledger.Find(id);
    const int32_t worker = rec->partition.worker();
    if (rec->state == PartitionState::kPlanned) {
      sends.Push(worker, id);
      ++queued;
    } else if (rec->state == PartitionState::kSent) {
      ++sends.window(worker).in_flight;
      hold.Hold(id, worker, rec->partition.iteration());
    }
    recovered(*rec);
  }
  for (int32_t node = 0; node < sends.nodes(); ++node) sends.window(node).HoldInFlight();
  return queued;
}

}  // namespace loft::sched
