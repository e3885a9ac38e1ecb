// Lookups in a MembershipView (core/proto/loft.proto): which nodes are
// live and where each serves. Pure functions over the message.
//
// Not responsible for: deciding membership (scheduler/liveness.h) or
// keeping views (edge_agent/view_book.h).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "core/proto/loft.pb.h"

namespace loft {

// The entry of `node` in `view`, or nullptr when it is not live there.
inline const v1::Member* FindMember(const v1::MembershipView& view, int32_t node) {
  for (const v1::Member& m : view.members()) {
    if (m.node() == node) return &m;
  }
  return nullptr;
}

inline bool IsMember(const v1::MembershipView& view, int32_t node) {
  return FindMember(view, node) != nullptr;
}

}  // namespace loft
