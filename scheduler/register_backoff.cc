#include "scheduler/register_backoff.h"

#include <algorithm>

namespace loft::sched {

double RegisterBackoff::Admit(int node, double now_ms) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    nodes_[node] = Node{now_ms, 0};  // one re-registration (a restart) is free
    return 0;
  }
  Node& n = it->second;
  const double since = now_ms - n.last_ms;
  if (since < n.wait_ms) return n.wait_ms - since;
  n.wait_ms = since < options_.stable_ms ? std::min(options_.max_ms, std::max(options_.min_ms, 2 * n.wait_ms))
                                         : options_.min_ms;
  n.last_ms = now_ms;
  return 0;
}

}  // namespace loft::sched
