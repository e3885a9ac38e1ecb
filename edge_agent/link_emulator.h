// TokenBucket: EMULATION of a link's rate for local experiments (an
// agent can emulate its spec link rate with a token bucket). It makes
// a caller wait, through the injected Clock, until `bytes` fit the
// configured rate. One bucket per direction of a node's link (up, down)
// is shared by everything that node sends or receives: the peer records it
// serves and fetches, and its ring all-reduce messages (RingLinkEmulation).
// It is not a network emulator (use the testbed's tbf qdiscs for that).
//
// The bucket is a virtual-time pacer (GCRA): a request of b bytes starts
// when the link is free (or at `since`, if later) and ends b/rate later;
// the caller waits until that end, less the burst (`burst_bytes` may pass
// unpaced after an idle period, like a tbf qdisc's burst). A node's
// buckets come from MakeLinkBucket, whose depth is the spec's burst rule
// (core/cluster_spec.h LinkBurstBytes), as the testbed's tbf and loft-sim.
//
// Not responsible for: latency (the PeerFetcher adds the spec's
// latency_ms once per partition's remote phase, RingLinkEmulation once
// per ring message).
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/clock.h"
#include "core/cluster_spec.h"

namespace loft::agent {

class TokenBucket {
 public:
  // rate_mbps > 0 (megabits/s); burst_bytes: bucket depth (< 0 counts as 0).
  TokenBucket(Clock* clock, double rate_mbps, double burst_bytes);
  // Waits (clock->SleepForMicros) until `bytes` have been paid for;
  // returns the microseconds waited.
  int64_t Acquire(int64_t bytes);
  // As Acquire, for a transfer that began at `since_us` (clock time, ≤ now):
  // the time the link could already have spent on it is credited.
  int64_t AcquireSince(int64_t bytes, int64_t since_us);
  double rate_mbps() const { return rate_mbps_; }
  double burst_bytes() const { return burst_us_ * bytes_per_us_; }

 private:
  Clock* clock_;
  double rate_mbps_;
  double bytes_per_us_;
  double burst_us_;  // the burst as time at this rate
  std::mutex mu_;
  double free_at_us_;  // when the link has sent everything paid for so far
};

// A bucket for one direction of a node's link at `rate_mbps` (the spec's
// link.up_mbps or link.down_mbps), as deep as the spec's burst rule makes
// that link: LinkBurstBytes(network, rate_mbps).
std::unique_ptr<TokenBucket> MakeLinkBucket(Clock* clock, const NetworkSpec& network, double rate_mbps);

// The link emulation of a ring transport (edge_agent/zmq_transport.h):
// a message of b bytes from rank s to this node pays this node's up bucket
// at the sender (Send) and its down bucket at the receiver, dated from
// when the sender started sending (arrival − b / up_mbps[s]), so a
// transfer runs at min(s.up, own down) as a flow on the two links, sharing
// them with the peer fetches; then it is held until latency_ms after its
// arrival, max(latency of s, own latency), as loft-sim's ring steps.
struct RingLinkEmulation {
  Clock* clock = nullptr;          // null = no emulation at all
  TokenBucket* up = nullptr;       // null = rates not emulated (e.g. the testbed's tbf)
  TokenBucket* down = nullptr;     // null = rates not emulated
  std::vector<double> up_mbps;     // per rank: the senders' up rates
  std::vector<double> latency_ms;  // per rank; empty = no latency
  int self = 0;                    // this node's rank

  bool enabled() const { return clock != nullptr; }
  // Pays the uplink for a message about to be sent (waits).
  void BeforeSend(int64_t bytes) const;
  // Waits until a message of `bytes` from `from` that arrived at
  // `arrived_us` has crossed this node's downlink and the latency.
  void AfterReceive(int from, int64_t bytes, int64_t arrived_us) const;
};

}  // namespace loft::agent
