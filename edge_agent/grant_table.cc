#include "edge_agent/grant_table.h"

#include <fmt/format.h>

namespace loft::agent {

void GrantTable::Add(const v1::ServeGrant& grant) {
  Key key{grant.partition_id(), grant.requester()};
  auto [it, inserted] = grants_.try_emplace(key);
  if (inserted) order_.push_back(key);
  const uint8_t serves = grant.decoded() ? (kRecord | kDecoded) : kRecord;
  for (uint64_t id : grant.sample_ids()) it->second[id] |= serves;
  while (grants_.size() > max_grants_ && !order_.empty()) {
    grants_.erase(order_.front());
    order_.pop_front();
  }
}

Status GrantTable::Authorize(uint64_t partition_id, int32_t requester, std::span<const uint64_t> ids,
                             bool decoded) {
  auto it = grants_.find(Key{partition_id, requester});
  if (it == grants_.end()) {
    return Unavailable(fmt::format("no grant yet for partition {} requester {}", partition_id, requester));
  }
  // Consume as we check (an id listed twice fails on its second
  // occurrence); on a refusal put back what this request consumed.
  auto& granted = it->second;
  const uint8_t bit = decoded ? kDecoded : kRecord;
  for (size_t k = 0; k < ids.size(); ++k) {
    auto g = granted.find(ids[k]);
    if (g == granted.end() || (g->second & bit) == 0) {
      for (size_t j = 0; j < k; ++j) granted[ids[j]] |= bit;
      return PermissionDenied(
          fmt::format("sample {} is not granted to node {} for partition {}{} (or was served already)",
                      ids[k], requester, partition_id, decoded ? " decoded" : ""));
    }
    g->second &= static_cast<uint8_t>(~bit);
    if (g->second == 0) granted.erase(g);
  }
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
