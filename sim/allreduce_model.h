// The ring all-reduce and the scheduler's per-iteration overhead as
// loft-sim charges them (docs/cluster-spec.md
// "training.allreduce" and "scheduler").
//
// The agents' all-reduce (models/ring_allreduce.h) scatters each chunk
// straight to its owner and gathers the reduced chunks straight back: two
// phases of N − 1 concurrent transfers per member. Each member sends and
// receives 2(N − 1)·⌈P/N⌉ parameters, as in a ring, so the slowest link's
// transfer time is a ring's; loft-sim charges that ring (docs/testbed.md
// "Found 2026-11-28, the all-reduce on the wire": the step latencies and the queueing
// differ, and calibration absorbs the former).
// A ring all-reduce of P float32 parameters among N members (node
// indices in ring order, the view's order) takes (each ring message is
// held max(sender's, receiver's latency_ms) after it arrived; edge_agent
// link emulation):
//   one hello exchange: the members' largest latency;
//   2(N−1) steps; in each, every member sends ⌈P/N⌉ parameters (4·⌈P/N⌉
//   bytes) to the next member over the link member→next, whose payload
//   rate is min(up_mbps of the sender, down_mbps of the receiver) ×
//   network.packet_efficiency (TCP/IP framing) and whose
//   latency is max(latency_ms of its two ends). Each link also carries
//   network.ack_bytes_per_byte of the chunk: the TCP ACKs a member sends
//   back for the chunk it receives go on its own uplink and the previous
//   member's downlink, the same load per link as when charged on the
//   chunk's path, so a chunk takes 4·⌈P/N⌉·(1 + ack_bytes_per_byte ×
//   packet_efficiency) bytes at the payload rate (WireChunkBytes; the
//   ACKs are link bytes). A step ends when its
//   slowest link is done: step = max over links of
//   (WireChunkBytes·8 / (rate·1000) ms + the link's latency);
//   plus the reducer: (N−1)·⌈P/N⌉ elements × reduce_ns_per_element,
//   plus fixed_ms.
// Verified chunks (training.byzantine_tolerance f > 0, models/ring_allreduce.h
// "Verified chunks"; with r1 = min(f+1, N) primaries per chunk), when all
// primaries agree: each scatter step (the first N−1) carries r1 chunks per
// link (every member sends each chunk to its r1 primaries), each gather
// step (the last N−1) one chunk plus (r1−1) 32-byte digests; after the
// steps one more exchange (the dispute bitmaps, a hello's latency); the
// reducer reduces r1 chunks (r1 × the elements). Disputes (an attack)
// are not charged. StepChunkBytes / StepWireBytes give a step's bytes,
// VerifyMs the bitmap exchange.
// training.allreduce.step_latency_ms, when set, replaces every link's
// latency and the hello's. With links: false the transfer term is left
// out (calibrated specs whose ring ran faster than the spec's links
// allow, e.g. an unshaped ring). N ≤ 1: no all-reduce (0 ms).
// training.model none: disabled.
// RingMs = TransferMs (2(N−1) × the slowest link's transfer) + LatencyMs
// (the rest of the steps, and the hello) + TailMs (reducer, fixed_ms).
//
// Priors when the spec leaves a field out: parameters from the agent's
// default model (models/model.h: softmax d→10, mlp d→256→128→10, d =
// dataset.sample_bytes); latencies from the members' link.latency_ms;
// reduce_ns_per_element = 1 ns for mean/weighted_mean, 10 ns for the
// robust reducers (rough single-core figures).
//
// The simulator runs the same ring on its flow network (sim/simulator.h):
// the hello, then per step one flow of WireChunkBytes from each member to
// the next, each started after its link's latency (sharing the links with
// the peer fetches), alongside the exchange's CPU on members with a quota
// (agent.cpu_ms_per_allreduce_mb for the chunk a member sends and the one
// it receives, through its quota), the step ending when its last flow and
// that CPU are done; then TailMs,
// as CPU at one core on every member (through the member's CPU quota
// where it has one). Without contention and quotas that is RingMs exactly.
//
// Not responsible for: node failures during the ring (the simulator
// restarts the ring with the surviving members), contention (the
// simulator's flow network).
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/cluster_spec.h"

namespace loft::sim {

// Parameters of the agent's `model` (core/cluster_spec.h).
using ::loft::ModelParameterCount;
// The reducer's prior cost per element for training.aggregation.
double PriorReduceNsPerElement(const std::string& aggregation);

class AllreduceModel {
 public:
  explicit AllreduceModel(const ClusterSpec& spec);

  bool enabled() const { return parameters_ > 0; }
  int64_t parameters() const { return parameters_; }
  double reduce_ns_per_element() const { return reduce_ns_; }

  // One ring all-reduce among `members` (node indices, ring order).
  double RingMs(std::span<const int32_t> members) const;
  // Its parts: the transfers (2(N−1) steps at the slowest link, 0 with
  // links: false), the step latencies, the reducer's elements.
  double TransferMs(std::span<const int32_t> members) const;
  double LatencyMs(std::span<const int32_t> members) const;
  double ReduceElements(size_t members) const;
  // The ring's pieces as the simulator runs them: the hello before the
  // steps, a link's latency, the bytes each member sends per step
  // (4·⌈P/N⌉); after the steps the reducer and fixed_ms. links(): whether
  // the transfers are limited by the spec's links (training.allreduce.links).
  double HelloMs(std::span<const int32_t> members) const;
  double LinkLatencyMs(int32_t from, int32_t to) const;
  double ChunkBytes(size_t members) const;
  // What a chunk and its ACKs take on the links at the payload rate:
  // ChunkBytes × (1 + ack_bytes_per_byte × packet_efficiency). The
  // simulator's ring flows carry it.
  double WireChunkBytes(size_t members) const { return ChunkBytes(members) * (1.0 + ack_ * efficiency_); }
  // The state transfer's bytes on its path, its ACKs charged with it (a
  // point-to-point transfer: this puts them on the data's links, not the
  // reverse ones; rare, and small against the transfer).
  double WireStateBytes() const { return StateBytes() * (1.0 + ack_ * efficiency_); }
  double TailMs(size_t members) const;
  // Verified chunks (above): the primaries per chunk (1 for the plain ring),
  // step `step`'s payload bytes per member and its link bytes with ACKs,
  // and the dispute-bitmap exchange after the steps (0 for the plain ring).
  int Primaries(size_t members) const;
  double StepChunkBytes(size_t members, int step) const;
  double StepWireBytes(size_t members, int step) const {
    return StepChunkBytes(members, step) * (1.0 + ack_ * efficiency_);
  }
  double VerifyMs(std::span<const int32_t> members) const;
  // The job's state a restarted member fetches before its first ring
  // (models/checkpoint.h: float32 parameters and SGD velocity).
  double StateBytes() const { return 8.0 * static_cast<double>(parameters_); }
  bool links() const { return use_links_; }

 private:
  std::vector<LinkSpec> links_;  // per node
  int64_t parameters_ = 0;
  bool int8_ = false;  // training.exchange.compression: int8
  double step_latency_ms_ = -1;
  double reduce_ns_ = 0;
  double fixed_ms_ = 0;
  bool use_links_ = true;
  int tolerance_ = 0;      // training.byzantine_tolerance
  double efficiency_ = 1;  // network.packet_efficiency
  double ack_ = 0;         // network.ack_bytes_per_byte
};

}  // namespace loft::sim
