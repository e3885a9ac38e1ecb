// FlowNetwork: flow-level model of the cluster's links with max-min fair
// sharing. Every node has an uplink and a downlink (bytes per ms). A flow
// carries `bytes` from a serving node to a reading node and is limited by
// the server's uplink and the reader's downlink, shared with every other
// flow crossing either. Rates are the max-min fair allocation computed by
// progressive filling, recomputed whenever a flow starts, finishes or is
// cancelled; the earliest finishing flow is the one pending event. Flows
// started at the same instant are settled by one recomputation (an event
// at the same time, after the ones already queued), so starting k flows
// costs one progressive filling, not k.
//
// Latency is not modelled here (the caller starts a flow after the link
// latency). Not responsible for: disks, compute, which samples a flow
// carries.
// Thread-safety: not thread-safe; driven by one EventQueue.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "sim/event_queue.h"

namespace loft::sim {

class FlowNetwork {
 public:
  // ok = false when the flow was cancelled (a node failed).
  using Done = std::function<void(bool ok)>;

  // Capacities in bytes per millisecond, one per node (> 0).
  FlowNetwork(EventQueue* queue, std::vector<double> up_bytes_per_ms, std::vector<double> down_bytes_per_ms);

  // Starts a flow now. `bytes` > 0. Returns its id.
  uint64_t Start(int server, int reader, double bytes, Done done);
  // Cancels every flow whose server or reader is `node`; their Done run
  // (with ok = false) after the rates are recomputed.
  void CancelNode(int node);
  // Cancels one flow without running its Done. Unknown ids are ignored.
  void Cancel(uint64_t flow);

  // Current rate of a flow in bytes/ms (0 if unknown); settles flows
  // started at this instant first. For tests.
  double RateOf(uint64_t flow);
  size_t active() const { return flows_.size(); }
  uint64_t recomputes() const { return recomputes_; }

 private:
  struct Flow {
    int server = 0;
    int reader = 0;
    double remaining = 0;
    double rate = 0;
    Done done;
  };
  void Advance();    // drain remaining bytes up to now
  void Recompute();  // max-min fair rates + reschedule the next finish
  void OnTimer(uint64_t generation);
  void Settle();

  bool settle_pending_ = false;
  bool dirty_ = false;  // flows changed since the last Recompute

  EventQueue* queue_;
  std::vector<double> up_;
  std::vector<double> down_;
  std::map<uint64_t, Flow> flows_;  // ordered by id: deterministic
  uint64_t next_id_ = 1;
  uint64_t generation_ = 0;
  double last_ms_ = 0;
  uint64_t recomputes_ = 0;
  // Scratch for progressive filling, sized 2·nodes.
  std::vector<double> cap_;
  std::vector<int32_t> unfrozen_;
  std::vector<std::vector<uint64_t>> by_resource_;
  std::vector<int32_t> touched_;
};

}  // namespace loft::sim
