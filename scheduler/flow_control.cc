#include "scheduler/flow_control.h"

#include <algorithm>

namespace loft::sched {

std::map<int32_t, loft::v1::ServeGrant> GrantsFor(const loft::v1::Partition& p) {
  std::map<int32_t, loft::v1::ServeGrant> grants;
  for (int k = 0; k < p.sample_ids_size(); ++k) {
    const int32_t src = p.sources(k);
    if (src == p.worker()) continue;
    auto [it, fresh] = grants.try_emplace(src);
    loft::v1::ServeGrant& g = it->second;
    if (fresh) {
      g.set_partition_id(p.id());
      g.set_requester(p.worker());
      // A holder that decodes for the worker may serve each id twice: decoded,
      // and as the record the worker spot-checks it against.
      g.set_decoded(std::find(p.decoded_from().begin(), p.decoded_from().end(), src) !=
                    p.decoded_from().end());
      g.set_view(p.view());
    }
    g.add_sample_ids(p.sample_ids(k));
  }
  return grants;
}

int SendServeGrants(const loft::v1::Partition& p,
                    const std::function<void(int32_t, loft::v1::ServeGrant&&)>& send) {
  int sent = 0;
  for (auto& [src, grant] : GrantsFor(p)) {
    send(src, std::move(grant));
    ++sent;
  }
  return sent;
}

}  // namespace loft::sched
