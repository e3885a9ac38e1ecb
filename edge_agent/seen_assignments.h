// SeenAssignments: the (partition id, attempt) pairs this agent accepted,
// so that an assignment sent again (a scheduler re-sends what its journal
// does not know as sent after a restart, or a message is duplicated) is
// not trained twice. Bounded: the oldest pairs are forgotten first
// (a pair that old has long been acked or timed out and retried under a
// new attempt).
//
// Not responsible for: deciding what to run (AgentService::Accept).
// Thread-safety: not thread-safe (the poll thread uses it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <utility>

namespace loft::agent {

class SeenAssignments {
 public:
  explicit SeenAssignments(size_t capacity = size_t{1} << 16) : capacity_(capacity == 0 ? 1 : capacity) {}

  // True when (id, attempt) was already accepted (a duplicate).
  bool Contains(uint64_t id, int32_t attempt) const { return seen_.count({id, attempt}) > 0; }
  // Remembers an accepted (id, attempt).
  void Add(uint64_t id, int32_t attempt) {
    if (!seen_.insert({id, attempt}).second) return;
    order_.emplace_back(id, attempt);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
  }
  size_t size() const { return seen_.size(); }

 private:
  size_t capacity_;
  std::set<std::pair<uint64_t, int32_t>> seen_;
  std::deque<std::pair<uint64_t, int32_t>> order_;
};

}  // namespace loft::agent
