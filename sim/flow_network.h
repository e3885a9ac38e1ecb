// FlowNetwork: flow-level model of the cluster's links with max-min fair
// sharing. Every node has an uplink and a downlink (bytes per ms). A flow
// carries `bytes` from a serving node to a reading node and is limited by
// the server's uplink and the reader's downlink, shared with every other
// flow crossing either. Rates are the max-min fair allocation computed by
// progressive filling; the earliest finishing flow is the one pending
// event. Flows started at the same instant are settled by one
// recomputation (an event at the same time, after the ones already
// queued), so starting k flows costs one progressive filling, not k.
//
// Exact mode (recompute_interval_ms = 0, the default): rates are
// recomputed whenever a flow starts, finishes or is cancelled. With an
// interval > 0 (for networks with thousands of concurrent flows), a
// finishing flow's bandwidth is handed to the others at most once per
// interval: in between, the remaining flows keep their rates (capacity
// freed by a finished flow stays idle until the next recomputation), so
// completion times can only be later than exact max-min, never earlier.
//
// Token-bucket bursts (SetBursts; none by default): each uplink and
// downlink also holds a bucket of burst bytes, refilled at the link's rate
// while no flow crosses it (and full at the start). A starting flow's
// first min(tokens of its two links) bytes go at once and are taken from
// both buckets; the rest flows as above. This is how tbf and the agents'
// token buckets shape a link (docs/testbed.md: 16 KiB or 2 ms of traffic):
// a small transfer after a pause is not held to the rate. While a flow
// crosses a link its bucket does not refill, even when the link is not
// saturated (the bucket can only be fuller in reality).
//
// Latency is not modelled here (the caller starts a flow after the link
// latency). Not responsible for: disks, compute, which samples a flow
// carries.
// Thread-safety: not thread-safe; driven by one EventQueue.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "sim/event_queue.h"

namespace loft::sim {

class FlowNetwork {
 public:
  // ok = false when the flow was cancelled (a node failed).
  using Done = std::function<void(bool ok)>;

  // Capacities in bytes per millisecond, one per node (> 0).
  FlowNetwork(EventQueue* queue, std::vector<double> up_bytes_per_ms, std::vector<double> down_bytes_per_ms,
              double recompute_interval_ms = 0);

  // Starts a flow now. `bytes` > 0. Returns its id (ids are never reused).
  // `burst` false: the flow takes no tokens (it still keeps its links'
  // buckets from refilling while it runs).
  uint64_t Start(int server, int reader, double bytes, Done done, bool burst = true);
  // Cancels every flow whose server or reader is `node`; their Done run
  // (with ok = false) after the rates are recomputed.
  void CancelNode(int node);
  // Cancels one flow without running its Done. Unknown ids are ignored.
  void Cancel(uint64_t flow);
  // Bucket depths in bytes, one per node (>= 0; 0 = no burst on that
  // link). Call before the first Start.
  void SetBursts(std::vector<double> up_burst_bytes, std::vector<double> down_burst_bytes);

  // Current rate of a flow in bytes/ms (0 if unknown); settles flows
  // started at this instant first. For tests.
  double RateOf(uint64_t flow);
  size_t active() const { return index_.size(); }
  uint64_t recomputes() const { return recomputes_; }

 private:
  struct Flow {
    uint64_t id = 0;  // 0 = free slot
    int server = 0;
    int reader = 0;
    double remaining = 0;
    double rate = 0;
    Done done;
  };
  uint32_t Alloc();
  void Free(uint32_t slot);
  // Bucket of resource r (2·node = uplink, 2·node + 1 = downlink) refilled
  // up to now when no flow crosses it; returns its tokens.
  double& Tokens(int32_t r);
  void Advance();       // drain remaining bytes up to now
  void Recompute();     // max-min fair rates, then ScheduleNext
  void ScheduleNext();  // timer for the earliest finishing flow
  void OnTimer(uint64_t generation);
  void Settle();

  EventQueue* queue_;
  std::vector<double> up_;
  std::vector<double> down_;
  double interval_ms_ = 0;
  std::vector<Flow> slots_;
  std::vector<uint32_t> free_;                    // free slots, reused LIFO
  std::unordered_map<uint64_t, uint32_t> index_;  // live flow id -> slot
  uint64_t next_id_ = 1;
  uint64_t generation_ = 0;
  double last_ms_ = 0;
  double last_recompute_ms_ = -1e300;
  uint64_t recomputes_ = 0;
  bool settle_pending_ = false;
  bool dirty_ = false;  // flows changed since the last Recompute
  // Scratch for progressive filling, sized 2·nodes.
  std::vector<double> cap_;
  std::vector<int32_t> unfrozen_;
  std::vector<std::vector<uint32_t>> by_resource_;
  std::vector<int32_t> touched_;
  // Bursts, per resource (2·node = uplink, 2·node + 1 = downlink).
  std::vector<double> burst_;   // bucket depth (empty = no bursts)
  std::vector<double> tokens_;  // tokens as of idle_since_ (or now, while crossed)
  std::vector<double> idle_since_;
  std::vector<int32_t> crossing_;  // live flows crossing the resource
};

}  // namespace loft::sim
