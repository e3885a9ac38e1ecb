// ClusterModel: the physical side of a simulated cluster, read from the
// ClusterSpec — how long compute and disk reads take on each node, link
// capacities, when nodes are down, which nodes are Byzantine.
//
// Times follow DESIGN.md "Planning" with the spec's constants:
//   compute  (fixed_ms + per_sample_ms·b) · jitter · slowdown
//   disk     l · sample_bytes / disk rate       (0 when l = 0)
//   link     latency_ms, then bytes at up/down payload rates (FlowNetwork):
//            the spec's rates × network.packet_efficiency (TCP/IP framing);
//            a sample fetched from a peer carries sample_bytes +
//            network.record_overhead_bytes (record header, message framing)
// sample_bytes is SampleWireBytes (core/cluster_spec.h): with encoding jpeg
// the mean stored record (dataset.record_bytes or its estimate), as the
// planner's priors; the decode after the reads is charged by the
// simulator's agents (simulator_agent.cc ReadDone).
// jitter = JitterFactor(compute.jitter, compute.jitter_kind, z) (core/cluster_spec.h;
// normal: max(0.05, 1 + jitter·z)), z ~ N(0, 1) from a per-node SplitMix64
// stream seeded by (seed, node): draws do not depend on other nodes.
// slowdown = product of the factors of slowdowns active at compute start.
//
// Not responsible for: contention (FlowNetwork), scheduling (the real
// scheduler code driven by Simulator).
// Thread-safety: not thread-safe (the jitter streams advance on draw).
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster_spec.h"

namespace loft::sim {

// Megabits per second -> bytes per millisecond.
inline double BytesPerMs(double mbps) {
  return mbps * 1e6 / 8.0 / 1000.0;
}

class ClusterModel {
 public:
  ClusterModel(const ClusterSpec& spec, uint64_t seed);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int64_t sample_bytes() const { return sample_bytes_; }
  // Payload bytes on the links for `samples` fetched from one peer.
  double FetchBytes(int64_t samples) const {
    return static_cast<double>(samples) * (static_cast<double>(sample_bytes_) + record_overhead_bytes_);
  }
  // The same for samples served decoded (dataset.decode_placement auto):
  // DecodedWireBytes each (the model input's levels), ρ times a record.
  double DecodedFetchBytes(int64_t samples) const {
    return static_cast<double>(samples) * (decoded_bytes_ + record_overhead_bytes_);
  }
  double decoded_bytes() const { return decoded_bytes_; }

  // Compute time of a batch of `batch` samples of step `iteration` started
  // at `start_ms`; draws the node's next jitter value (with
  // compute.jitter_shared, mixed with the step's shared draw).
  double ComputeMs(int node, int64_t batch, double start_ms, int64_t iteration = 0);
  // Compute time without jitter (the spec's formula × slowdowns).
  double NominalComputeMs(int node, int64_t batch, double start_ms) const;
  double LocalReadMs(int node, int64_t samples) const;
  double LatencyMs(int node) const { return nodes_[node].latency_ms; }
  // network.request_overhead_ms: per request to a peer, beyond latency and transfer.
  double RequestOverheadMs() const { return request_overhead_ms_; }
  // Payload rates (link rate × network.packet_efficiency).
  double UpBytesPerMs(int node) const { return nodes_[node].up; }
  double DownBytesPerMs(int node) const { return nodes_[node].down; }
  std::vector<double> UpRates() const;
  std::vector<double> DownRates() const;
  // Token-bucket depths in payload bytes (network.burst_*; FlowNetwork::SetBursts).
  std::vector<double> UpBursts() const;
  std::vector<double> DownBursts() const;
  ByzantineKind byzantine(int node) const { return nodes_[node].byzantine; }

  // Down intervals [start_ms, end_ms) of a node, sorted by start.
  struct Outage {
    double start_ms;
    double end_ms;
  };
  const std::vector<Outage>& outages(int node) const { return nodes_[node].outages; }
  bool IsDown(int node, double at_ms) const;

 private:
  struct Node {
    double fixed_ms = 0;
    double per_sample_ms = 0;
    double jitter = 0;
    JitterKind jitter_kind = JitterKind::kNormal;
    double jitter_shared = 0;
    double disk = 0;  // bytes per ms
    double up = 0;
    double down = 0;
    double up_burst = 0;  // token-bucket depths, payload bytes
    double down_burst = 0;
    double latency_ms = 0;
    std::vector<SlowdownSpec> slowdowns;
    std::vector<Outage> outages;
    ByzantineKind byzantine = ByzantineKind::kNone;
    uint64_t rng = 0;  // SplitMix64 state
  };
  std::vector<Node> nodes_;
  uint64_t step_seed_ = 0;  // the steps' shared draws (compute.jitter_shared)
  double request_overhead_ms_ = 0;
  int64_t sample_bytes_ = 0;
  double record_overhead_bytes_ = 0;
  double decoded_bytes_ = 0;  // DecodedWireBytes
};

}  // namespace loft::sim
