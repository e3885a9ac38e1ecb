// The re-send after a scheduler restart: one rule, run by the daemon at
// the first tick of a scheduler recovered from its journal (loft-sim has
// no restart). What the journal left in flight:
//  - a partition planned but not known to be sent is queued again for its
//    worker (SendQueues): the streaming rule sends it as any other (an
//    agent ignores a duplicate assignment; a stale ack is ignored);
//  - a partition sent before the crash is in flight on its worker's
//    window, and held (RestartHold, flow_control.h): its assignment may
//    have died with the old process, so its node gets no partition of a
//    later iteration until it is acked, failed or timed out (a lost one
//    times out and is retried as a child partition);
//  - then every window holds the credits of what is in flight
//    (CreditWindow::HoldInFlight).
// It runs once: RestartResend::Recovered() arms it, the first
// ResendAfterRestart after that runs it.
//
// Not responsible for: sending (the streaming rule, send_queues.h), the
// engine's own bookkeeping (the `recovered` callback: sent partitions,
// open iterations).
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <functional>

#include "scheduler/flow_control.h"
#include "scheduler/ledger.h"
#include "scheduler/send_queues.h"

namespace loft::sched {

// Whether the re-send is still due.
class RestartResend {
 public:
  // The scheduler was recovered from a journal: the re-send is due.
  void Recovered() { due_ = true; }
  bool due() const { return due_; }
  // Marks it done; true when it was due.
  bool Take() {
    const bool was = due_;
    due_ = false;
    return was;
  }

 private:
  bool due_ = false;
};

// The rule above (no clock: it runs at the engine's first tick after
// Recovered), over the ledger's partitions in flight (ascending id). `recovered(record)` is called for
// each of them after the rule handled it (Planned: queued; Sent: held).
// Returns the number of partitions queued again, or -1 when the re-send
// was not due (nothing done).
int ResendAfterRestart(RestartResend& resend, const Ledger& ledger, SendQueues& sends, RestartHold& hold,
                       const std::function<void(const PartitionRecord&)>& recovered);

}  // namespace loft::sched
