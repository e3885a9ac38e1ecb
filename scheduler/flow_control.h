// Flow control of partitions to agents, and who may serve whom.
//  - CreditWindow: a node gets a PartitionAssignment only while it has an
//    unused credit: RegisterRequest.credits opens the window, every
//    CreditGrant / Heartbeat.credits adds (never above the window), every
//    assignment sent takes one. A partition that timed out gives its
//    credit back (its assignment or ack was probably lost; an agent that
//    still holds it refuses the extra one, so the window holds).
//  - GrantsFor(partition): the ServeGrant each serving peer receives
//    before the partition's worker asks it for samples; SendServeGrants:
//    the rule both engines run as a partition's assignment leaves (each
//    serving peer's grant first, ascending peer, then the assignment).
//  - RestartHold: after a scheduler restart, partitions sent before it
//    and not finished since may have died with the old process; until one
//    is acked, failed or timed out its node gets no later iteration (it
//    would run round t+1 while the ring waits for it in round t).
//
// Not responsible for: sending, the sessions file, clocks.
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "core/proto/loft.pb.h"

namespace loft::sched {

// Largest window or grant an agent may announce.
inline constexpr int64_t kMaxCredits = 1024;

struct CreditWindow {
  int64_t credits = 0;    // unused credits
  int64_t window = 0;     // RegisterRequest.credits: the agent's whole window
  int64_t in_flight = 0;  // assignments sent and not yet finished
  int64_t max_in_flight = 0;

  void Open(int64_t w) {
    window = w;
    credits = w;
    in_flight = 0;
  }
  void Grant(int64_t c) { credits = std::min(window, credits + c); }
  bool CanSend() const { return credits > 0; }
  void OnSent() {
    --credits;
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
  }
  // A partition in flight finished; `timed_out`: its credit comes back.
  void OnFinished(bool timed_out) {
    in_flight = std::max<int64_t>(0, in_flight - 1);
    if (timed_out) Grant(1);
  }
  // The node died: nothing in flight, no credit until it registers again.
  void Close() {
    in_flight = 0;
    credits = 0;
  }
  // After a restart: partitions found in flight hold their credits.
  void HoldInFlight() { credits = std::max<int64_t>(0, credits - in_flight); }
};

// Serving peer -> its ServeGrant for `p` (the samples p's worker reads
// from it), ascending peer.
std::map<int32_t, loft::v1::ServeGrant> GrantsFor(const loft::v1::Partition& p);

// Before `p`'s assignment is sent: `send(peer, grant)` for each serving
// peer's grant (GrantsFor, ascending peer). Returns how many were sent.
// The daemon puts them on the wire; loft-sim delivers them to the peers,
// which serve `p`'s worker only once theirs arrived.
int SendServeGrants(const loft::v1::Partition& p,
                    const std::function<void(int32_t, loft::v1::ServeGrant&&)>& send);

class RestartHold {
 public:
  void Hold(uint64_t partition_id, int32_t node, int64_t iteration) {
    held_[partition_id] = {node, iteration};
  }
  void Release(uint64_t partition_id) { held_.erase(partition_id); }
  void ReleaseNode(int32_t node) {
    std::erase_if(held_, [&](const auto& kv) { return kv.second.first == node; });
  }
  // Whether `node` must not yet receive a partition of `iteration`.
  bool Holds(int32_t node, int64_t iteration) const {
    return std::any_of(held_.begin(), held_.end(), [&](const auto& kv) {
      return kv.second.first == node && kv.second.second < iteration;
    });
  }

 private:
  std::map<uint64_t, std::pair<int32_t, int64_t>> held_;  // id -> (node, iteration)
};

}  // namespace loft::sched
