// AccusationBook: the scheduler's rule for ring members that other agents
// report (v1::PeerReport; issue 19 item 2). A node is evicted once f+1
// distinct other nodes reported it (f = training.byzantine_tolerance):
// with at most f Byzantine nodes, at least one honest node saw it
// misbehave, so f liars cannot evict an honest node. An evicted node stays
// evicted for the life of the scheduler process (its heartbeats and
// registrations are refused).
//
// Not responsible for: what a report means on the agent
// (edge_agent/ring_guard.h), removing the node from the view (the service
// does, as for a missed heartbeat).
// Thread-safety: not thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <set>

namespace loft::scheduler {

class AccusationBook {
 public:
  // Records that `reporter` reported `accused`; true when this report
  // evicts it (once). Reports of oneself are ignored.
  bool Report(int reporter, int accused, int tolerance);
  bool evicted(int node) const { return evicted_.count(node) > 0; }
  size_t reporters(int accused) const;

 private:
  std::map<int, std::set<int>> reporters_;
  std::set<int> evicted_;
};

}  // namespace loft::scheduler
