// AccusationBook: the scheduler's rule for ring members that other agents
// report (v1::PeerReport). A node is evicted once f+1
// distinct other nodes reported it (f = training.byzantine_tolerance):
// with at most f Byzantine nodes, at least one honest node saw it
// misbehave, so f liars cannot evict an honest node. An evicted node stays
// evicted for the life of the scheduler process (its heartbeats and
// registrations are refused).
//
// Which reports count (TakePeerReport, for every engine that receives
// v1::PeerReport; loft-sim's agents send none): a report accusing a node
// outside the cluster, or its reporter itself, is refused
// (InvalidArgument) and counts for nothing; reason "silent" goes to
// ReportSilent over the state's live members, any other reason to Report
// (tolerance f); a report of an evicted node, or a second report by the
// same reporter, changes nothing.
//
// Not responsible for: what a report means on the agent
// (edge_agent/ring_guard.h), authenticating the reporter, logs and
// metrics, removing the node from the view (the engine does, as for a
// missed heartbeat: sched::DepartAt).
// Thread-safety: not thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <set>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/scheduler_state.h"

namespace loft::sched {

// The tolerance to pass to Report for a "silent" report (a member whose
// ring hellos never arrive): silence is not evidence against the accused
// alone (the reporter's own link may be down, and it then finds everyone
// silent), so besides f+1 it takes a majority of the other live members:
// max(f, (live_nodes - 1) / 2). With fewer than 3 live members silence
// says nothing about who is at fault: no eviction (a huge tolerance).
int SilenceTolerance(int tolerance, int live_nodes);

class AccusationBook {
 public:
  // Records that `reporter` reported `accused`; true when this report
  // evicts it (once). Reports of oneself are ignored.
  bool Report(int reporter, int accused, int tolerance);
  // A "silent" report. With at least 3 live members, a reporter that has
  // reported every other live member silent is the one that hears nobody
  // (its ring endpoint is unreachable): it is evicted. Otherwise as Report
  // with SilenceTolerance. Returns the evicted node, or -1.
  int ReportSilent(int reporter, int accused, const std::set<int>& live, int tolerance);
  bool evicted(int node) const { return evicted_.count(node) > 0; }
  size_t reporters(int accused) const;

 private:
  std::map<int, std::set<int>> reporters_;
  std::set<int> evicted_;
  std::map<int, std::set<int>> silent_by_reporter_;
};

// The rule above for `pr`, sent by `reporter` (authenticated by the
// engine), with byzantine tolerance `tolerance`: the node this report
// evicts, or -1.
StatusOr<int> TakePeerReport(AccusationBook& book, const SchedulerState& state, int32_t reporter,
                             const v1::PeerReport& pr, int tolerance);

}  // namespace loft::sched
