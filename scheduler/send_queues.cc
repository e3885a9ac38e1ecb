#include "scheduler/send_queues.h"

#include <algorithm>

namespace loft::sched {

void SendQueues::Push(int32_t node, uint64_t partition) {
  queue_[static_cast<size_t>(node)].push_back(partition);
  ++queued_;
  if (listed_[static_cast<size_t>(node)]) return;
  listed_[static_cast<size_t>(node)] = 1;
  if (!with_queue_.empty() && with_queue_.back() > node) sorted_ = false;
  with_queue_.push_back(node);
}

void SendQueues::Clear(int32_t node) {
  std::deque<uint64_t>& q = queue_[static_cast<size_t>(node)];
  queued_ -= q.size();
  q.clear();
  // Still listed: the next stream drops it from the list.
}

void SendQueues::SortListed() {
  if (sorted_) return;
  std::sort(with_queue_.begin(), with_queue_.end());
  sorted_ = true;
}

}  // namespace loft::sched
