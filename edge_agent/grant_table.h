// GrantTable: which sample ids each requester may fetch from this agent,
// per partition, as told by the scheduler's ServeGrant messages. The
// serving side of "a peer asking for samples it is not assigned is
// refused".
//
// Each granted id is served once as its stored record, and, when the
// grant says `decoded` (the requester's partition has this agent in
// Partition.decoded_from), once more decoded (FetchRequest.decoded): the
// requester fetches the decoded input and spot-checks some ids against
// their record. Entries are kept (possibly emptied)
// until evicted oldest-first beyond `max_grants`, so a repeated request
// for a spent grant is refused (PermissionDenied) rather than told to
// wait.
// Not responsible for: authenticating the requester (the server checks
// the CURVE User-Id against the view), reading samples.
// Thread-safety: not thread-safe; owned by the server's poll thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::agent {

class GrantTable {
 public:
  explicit GrantTable(size_t max_grants) : max_grants_(max_grants == 0 ? 1 : max_grants) {}

  // Adds (merges) a grant. Evicts the oldest grants beyond the bound.
  void Add(const v1::ServeGrant& grant);
  // OK: every id is granted to `requester` for `partition_id`; the ids are
  // then consumed. Unavailable: no grant for (partition, requester) has
  // arrived yet. PermissionDenied: the grant exists but does not list an
  // id (naming it), or lists it but it was served already. Nothing is
  // consumed on error.
  // `decoded`: the ids are asked for decoded (their decoded serve is
  // consumed; PermissionDenied when the grant does not allow it).
  Status Authorize(uint64_t partition_id, int32_t requester, std::span<const uint64_t> ids,
                   bool decoded = false);
  // Drops every grant for `requester` (it left the view).
  void DropRequester(int32_t requester);
  size_t size() const { return grants_.size(); }

 private:
  using Key = std::pair<uint64_t, int32_t>;
  size_t max_grants_;
  // Per granted id, the serves left: kRecord and kDecoded bits.
  static constexpr uint8_t kRecord = 1, kDecoded = 2;
  std::map<Key, std::unordered_map<uint64_t, uint8_t>> grants_;
  std::deque<Key> order_;  // insertion order, for eviction
};

}  // namespace loft::agent
