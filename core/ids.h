// Typed ids. A SampleId is never silently a NodeId: each id is its own
// type wrapping an integer, comparable and hashable, with explicit access
// to the raw value.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>

namespace loft {

template <typename Tag, typename Rep = int64_t>
class TypedId {
 public:
  using rep_type = Rep;
  constexpr TypedId() = default;
  constexpr explicit TypedId(Rep v) : v_(v) {}
  constexpr Rep value() const { return v_; }
  constexpr auto operator<=>(const TypedId&) const = default;
  friend std::ostream& operator<<(std::ostream& os, TypedId id) { return os << id.v_; }

 private:
  Rep v_ = 0;
};

struct SampleIdTag {};
struct NodeIdTag {};
struct PartitionIdTag {};
struct PlanIdTag {};
struct JobIdTag {};

// Sample ids are 0 … samples−1 in dataset order.
using SampleId = TypedId<SampleIdTag, uint64_t>;
// Node ids are indices into the expanded cluster spec's node list.
using NodeId = TypedId<NodeIdTag, int32_t>;
using PartitionId = TypedId<PartitionIdTag, uint64_t>;
using PlanId = TypedId<PlanIdTag, uint64_t>;
using JobId = TypedId<JobIdTag, uint64_t>;

}  // namespace loft

template <typename Tag, typename Rep>
struct std::hash<loft::TypedId<Tag, Rep>> {
  size_t operator()(loft::TypedId<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value()); }
};
