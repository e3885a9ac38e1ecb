#include "edge_agent/round_retry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

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
    std::vector<int> survivors;
    for (int node : res.members.nodes) {
      if (IsMember(*nv, node)) survivors.push_back(node);
    }
    LOFT_ASSIGN_OR_RETURN(RingMembers next, views->Members(nv->view()));
    LOFT_RETURN_IF_ERROR(connect(next));
    next.nodes = survivors;
    if (std::find(survivors.begin(), survivors.end(), self) == survivors.end())
      return FailedPrecondition("this node left the view during the all-reduce");
    spdlog::info("restarting the all-reduce of round {} among {} survivors (view {})", round,
                 survivors.size(), next.view);
    res.members = std::move(next);
  }
}

}  // namespace loft::agent
