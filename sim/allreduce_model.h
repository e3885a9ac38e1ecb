// The ring all-reduce and the scheduler's per-iteration overhead as
// loft-sim charges them (docs/cluster-spec.md
// "training.allreduce" and "scheduler").
//
// The agents' all-reduce (models/ring_allreduce.h) scatters each chunk
// straight to its owner and gathers the reduced chunks straight back: two
// phases, in each of which every member sends one payload to each of the
// N − 1 others and receives one from each, all at once. Among N members
// (node indices, the view's order) an all-reduce of P parameters takes
// (each ring message is held max(sender's, receiver's latency_ms) after
// it arrived; edge_agent link emulation):
//   one hello exchange: the members' largest latency;
//   2 phases: scatter, then gather. In each, every pair payload is
//   ChunkBytes (4·⌈P/N⌉ bytes, 4 + ⌈P/N⌉ with int8) on the wire with
//   network.ack_bytes_per_byte of it for the TCP ACKs at the payload
//   rate (WireChunkBytes; ACKs are link bytes). A member's uplink carries
//   N − 1 payloads and its downlink N − 1, at its link's rate ×
//   network.packet_efficiency, so a member's transfers take
//   (N − 1)·WireChunkBytes·8 / (min(up_mbps, down_mbps)·efficiency·1000)
//   ms (MemberTransferMs), after the largest latency of its links
//   (MemberLatencyMs: max over the others of max(its, their latency_ms)).
//   A phase ends with its last member: max over members of latency +
//   transfers (PhaseMs);
//   plus the reducer: (N−1)·⌈P/N⌉ elements × reduce_ns_per_element,
//   plus fixed_ms.
// Verified chunks (training.byzantine_tolerance f > 0, models/ring_allreduce.h
// "Verified chunks"; with r1 = min(f+1, N) primaries per chunk), when all
// primaries agree: a scatter pair payload is r1 chunks (every member sends
// each chunk to its r1 primaries), a gather one a chunk plus (r1−1)
// 32-byte digests; after the phases one more exchange (the dispute
// bitmaps, a hello's latency); the reducer reduces r1 chunks (r1 × the
// elements). Disputes (an attack) are not charged. PhaseChunkBytes /
// PhaseWireBytes give a phase's pair payload, VerifyMs the bitmap exchange.
// training.allreduce.step_latency_ms, when set, replaces every link's
// latency and the hello's. With links: false the transfer term is left
// out (calibrated specs whose ring ran faster than the spec's links
// allow, e.g. an unshaped ring). N ≤ 1: no all-reduce (0 ms).
// training.model none: disabled.
// RingMs = TransferMs (per phase the slowest member's transfers) +
// LatencyMs (the rest of the phases, and the hello) + TailMs (reducer,
// fixed_ms).
//
// Priors when the spec leaves a field out: parameters from the agent's
// default model (models/model.h: softmax d→10, mlp d→256→128→10, d =
// dataset.sample_bytes); latencies from the members' link.latency_ms;
// reduce_ns_per_element = 1 ns for mean/weighted_mean, 10 ns for the
// robust reducers (rough single-core figures).
//
// The simulator runs the same exchange on its flow network
// (sim/simulator.h): the hello, then per phase one flow of PhaseWireBytes
// from each member to each other member, each started after its link's
// latency (sharing the links with the peer fetches), alongside the
// exchange's CPU on members with a quota (agent.cpu_ms_per_allreduce_mb
// for the N − 1 payloads a member sends and the N − 1 it receives, through
// its quota), the phase ending when its last flow and that CPU are done;
// then TailMs, as CPU at one core on every member (through the member's
// CPU quota where it has one). Without contention and quotas that is
// RingMs (max-min fair sharing of each member's uplink and downlink).
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
  // Its parts: the transfers (per phase the slowest member's, 0 with
  // links: false), the latencies, the reducer's elements.
  double TransferMs(std::span<const int32_t> members) const;
  double LatencyMs(std::span<const int32_t> members) const;
  double ReduceElements(size_t members) const;
  // The exchange's pieces as the simulator runs them: the hello before the
  // phases, a link's latency, a chunk's bytes (4·⌈P/N⌉, int8 4 + ⌈P/N⌉);
  // after the phases the reducer and fixed_ms. links(): whether the
  // transfers are limited by the spec's links (training.allreduce.links).
  static constexpr int kPhases = 2;  // scatter, gather
  // Largest exchange the simulator runs as one flow per ordered pair of
  // members (sim/simulator_agent.cc RingStep); larger ones as one flow per
  // member carrying its N − 1 payloads.
  static constexpr size_t kMaxPairwiseMembers = 32;
  double HelloMs(std::span<const int32_t> members) const;
  double LinkLatencyMs(int32_t from, int32_t to) const;
  double ChunkBytes(size_t members) const;
  // What a chunk and its ACKs take on the links at the payload rate:
  // ChunkBytes × (1 + ack_bytes_per_byte × packet_efficiency).
  double WireChunkBytes(size_t members) const { return ChunkBytes(members) * (1.0 + ack_ * efficiency_); }
  // The state transfer's bytes on its path, its ACKs charged with it (a
  // point-to-point transfer: this puts them on the data's links, not the
  // reverse ones; rare, and small against the transfer).
  double WireStateBytes() const { return StateBytes() * (1.0 + ack_ * efficiency_); }
  double TailMs(size_t members) const;
  // Verified chunks (above): the primaries per chunk (1 for the plain ring),
  // phase `phase`'s (0 scatter, 1 gather) payload from one member to
  // another and its link bytes with ACKs, and the dispute-bitmap exchange
  // after the phases (0 for the plain ring).
  int Primaries(size_t members) const;
  double PhaseChunkBytes(size_t members, int phase) const;
  double PhaseWireBytes(size_t members, int phase) const {
    return PhaseChunkBytes(members, phase) * (1.0 + ack_ * efficiency_);
  }
  double VerifyMs(std::span<const int32_t> members) const;
  // One member's part of a phase: its N − 1 payloads each way at its
  // link's rate, and the largest latency of its links to the others; the
  // phase: max over members of the sum.
  double MemberTransferMs(size_t members, int32_t node, int phase) const;
  double MemberLatencyMs(std::span<const int32_t> members, int32_t node) const;
  double PhaseMs(std::span<const int32_t> members, int phase) const;
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
