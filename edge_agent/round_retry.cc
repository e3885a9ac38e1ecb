#include "edge_agent/round_retry.h"

#include <spdlog/spdlog.h>

#include <string>

#include "core/membership.h"

namespace loft::agent {

bool RetryableInNewerView(const Status& st) {
  return st.code() == StatusCode::kDeadlineExceeded || st.code() == StatusCode::kUnavailable ||
         st.code() == StatusCode::kFailedPrecondition;
}

StatusOr<RetryResult> RunWithViewRetry(ViewBook* views, int self, int64_t view, uint32_t round,
                                       const std::function<Status(const RingMembers&)>& connect,
                                       const std::function<Status(const RingMembers&)>& attempt) {
  const std::string what = "all-reduce of round " + std::to_string(round);
  RetryResult res;
  LOFT_ASSIGN_OR_RETURN(res.members, views->Members(view));
  LOFT_RETURN_IF_ERROR(connect(res.members));
  while (true) {
    ++res.attempts;
    Status st = attempt(res.members);
    if (st.ok()) return res;
    if (!RetryableInNewerView(st)) return st.WithContext(what);
    spdlog::warn("all-reduce of round {} in view {} failed ({}); waiting for a new view", round,
                 res.members.view, st.ToString());
    auto nv = views->NewerView(res.members.view);
    if (!nv) return st.WithContext(what + ", no newer view");
    if (!IsMember(*nv, self)) return FailedPrecondition("this node left the view during the all-reduce");
    // Every live member of the newer view, not the previous attempt's
    // survivors: the set must be the same on every member, whichever views
    // each saw in between. A node that left and rejoined between two views
    // one member saw and another skipped was otherwise in one's set and
    // not the other's, and both waited out the ring timeout (a rejoin,
    // 2026-11-28). A member without a partition of the round joins it with
    // weight 0, as in a first attempt.
    LOFT_ASSIGN_OR_RETURN(RingMembers next, views->Members(nv->view()));
    LOFT_RETURN_IF_ERROR(connect(next));
    spdlog::info("restarting the all-reduce of round {} among the {} live members of view {}", round,
                 next.nodes.size(), next.view);
    res.members = std::move(next);
  }
}

}  // namespace loft::agent
