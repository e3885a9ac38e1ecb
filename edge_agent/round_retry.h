// RunWithViewRetry: the retry-on-newer-view loop of a ring round. An
// attempt among the members of one view that fails because a member is
// silent or gone (DeadlineExceeded, Unavailable, FailedPrecondition) is
// restarted among the live members of the newest view once the scheduler
// issues a newer one (the same round, that view's number: the survivors,
// and a node that rejoined, which takes part with weight 0), so that every
// member restarts with the same set whichever views it saw in between;
// without a newer view, or if this node left it, the round fails. Other
// errors end it at once.
//
// Not responsible for: what an attempt does (ModelTrainer::RunRound),
// connecting to members (`connect` does, e.g. ZmqTransport::SetPeers).
// Thread-safety: as ViewBook (the trainer thread).
#pragma once

#include <cstdint>
#include <functional>

#include "core/status.h"
#include "edge_agent/view_book.h"

namespace loft::agent {

// Whether a failed attempt may be retried in a newer view.
bool RetryableInNewerView(const Status& st);

struct RetryResult {
  RingMembers members;  // the members of the attempt that succeeded
  int attempts = 0;
};

// `connect` is called with every member set before its attempt (the first
// one included); `attempt` runs one attempt. `self` is this node.
StatusOr<RetryResult> RunWithViewRetry(ViewBook* views, int self, int64_t view, uint32_t round,
                                       const std::function<Status(const RingMembers&)>& connect,
                                       const std::function<Status(const RingMembers&)>& attempt);

}  // namespace loft::agent
