// Liveness: when a worker is dead and which partitions its death fails.
// One rule for JobDriver::OnWorkerDead (which fails them) and the daemon
// (which first lets the ring commit those it applied, ring_committer.h).
//  - A live worker silent (no heartbeat, ack or grant) for more than
//    `timeout_ms` is dead.
//  - A dead worker fails its own partitions in flight and every partition
//    in flight that reads a sample from it.
//
// Not responsible for: clocks (now_ms comes in), membership updates.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/proto/loft.pb.h"
#include "scheduler/ledger.h"

namespace loft::sched {

// A node is dead once it has been silent for more than the heartbeat
// timeout (strictly: a message exactly `timeout_ms` ago still counts).
inline bool HeartbeatExpired(double last_seen_ms, double now_ms, int64_t timeout_ms) {
  return now_ms - last_seen_ms > static_cast<double>(timeout_ms);
}
// The first time, on a clock of `resolution_ms` ticks, at which
// HeartbeatExpired holds for a node last heard from at `last_seen_ms`:
// what the daemon's Tick finds, and when loft-sim declares the death.
inline double HeartbeatExpiresAt(double last_seen_ms, double timeout_ms, double resolution_ms) {
  return last_seen_ms + timeout_ms + resolution_ms;
}

// Whether `node`'s death fails `p`: its worker, or one of its sources.
bool AffectedByDeath(const loft::v1::Partition& p, int32_t node);

// The partitions in flight that `node`'s death fails, in ledger order.
std::vector<uint64_t> AffectedPartitions(const Ledger& ledger, int32_t node);

}  // namespace loft::sched
