#include "edge_agent/grant_table.h"

#include <fmt/format.h>

namespace loft::agent {

void GrantTable::Add(const v1::ServeGrant& grant) {
  Key key{grant.partition_id(), grant.requester()};
  auto [it, inserted] = grants_.try_emplace(key);
  if (inserted) order_.push_back(key);
  it->second.insert(grant.sample_ids().begin(), grant.sample_ids().end());
  while (grants_.size() > max_grants_ && !order_.empty()) {
    grants_.erase(order_.front());
    order_.pop_front();
  }
}

Status GrantTable::Authorize(uint64_t partition_id, int32_t requester, std::span<const uint64_t> ids) {
  auto it = grants_.find(Key{partition_id, requester});
  if (it == grants_.end()) {
    return Unavailable(fmt::format("no grant yet for partition {} requester {}", partition_id, requester));
  }
  std::unordered_set<uint64_t> seen;
  for (uint64_t id : ids) {
    if (!it->second.count(id) || !seen.insert(id).second) {
      return PermissionDenied(
          fmt::format("sample {} is not granted to node {} for partition {} (or was served already)", id,
                      requester, partition_id));
    }
  }
  for (uint64_t id : ids) it->second.erase(id);
  return OkStatus();
}

void GrantTable::DropRequester(int32_t requester) {
  for (auto it = grants_.begin(); it != grants_.end();) {
    if (it->first.second == requester) {
      it = grants_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(order_, [&](const Key& k) { return k.second == requester; });
}

}  // namespace loft::agent
