#include "sim/allreduce_model.h"

#include <algorithm>

namespace loft::sim {

double PriorReduceNsPerElement(const std::string& aggregation) {
  return aggregation == "mean" || aggregation == "weighted_mean" ? 1.0 : 10.0;
}

AllreduceModel::AllreduceModel(const ClusterSpec& spec) {
  const auto& t = spec.training;
  if (t.model == "none") return;
  const auto& a = t.allreduce;
  parameters_ = a.parameters > 0 ? a.parameters : ModelParameterCount(t.model, spec.dataset.sample_bytes);
  int8_ = t.exchange.compression == "int8";
  step_latency_ms_ = a.step_latency_ms;
  reduce_ns_ =
      a.reduce_ns_per_element >= 0 ? a.reduce_ns_per_element : PriorReduceNsPerElement(t.aggregation);
  fixed_ms_ = a.fixed_ms;
  use_links_ = a.links;
  tolerance_ = t.byzantine_tolerance;
  efficiency_ = spec.network.packet_efficiency;
  ack_ = spec.network.ack_bytes_per_byte;
  links_.reserve(spec.nodes.size());
  for (const auto& n : spec.nodes) links_.push_back(n.link);
}

double AllreduceModel::ReduceElements(size_t members) const {
  if (members <= 1) return 0;
  const auto n = static_cast<int64_t>(members);
  const int64_t chunk = (parameters_ + n - 1) / n;
  return static_cast<double>((n - 1) * chunk);
}

int AllreduceModel::Primaries(size_t members) const {
  return tolerance_ > 0 ? static_cast<int>(std::min<size_t>(static_cast<size_t>(tolerance_) + 1, members))
                        : 1;
}

double AllreduceModel::PhaseChunkBytes(size_t members, int phase) const {
  const int r1 = Primaries(members);
  if (r1 <= 1) return ChunkBytes(members);
  if (phase == 0) return r1 * ChunkBytes(members);  // scatter
  return ChunkBytes(members) + 32.0 * (r1 - 1);     // gather: a copy and digests
}

double AllreduceModel::VerifyMs(std::span<const int32_t> members) const {
  return Primaries(members.size()) > 1 ? HelloMs(members) : 0.0;
}

double AllreduceModel::MemberTransferMs(size_t members, int32_t node, int phase) const {
  if (!use_links_ || members <= 1) return 0;
  const LinkSpec& l = links_.at(static_cast<size_t>(node));
  // What the member sends equals what it receives: N−1 pair payloads.
  const double bits = static_cast<double>(members - 1) * PhaseWireBytes(members, phase) * 8.0;
  return bits / (std::min(l.up_mbps, l.down_mbps) * efficiency_ * 1000.0);
}

double AllreduceModel::MemberLatencyMs(std::span<const int32_t> members, int32_t node) const {
  double lat = 0;
  for (int32_t m : members)
    if (m != node) lat = std::max(lat, LinkLatencyMs(node, m));
  return lat;
}

double AllreduceModel::PhaseMs(std::span<const int32_t> members, int phase) const {
  double ms = 0;
  for (int32_t m : members)
    ms = std::max(ms, MemberLatencyMs(members, m) + MemberTransferMs(members.size(), m, phase));
  return ms;
}

double AllreduceModel::TransferMs(std::span<const int32_t> members) const {
  const size_t n = members.size();
  if (!enabled() || n <= 1 || !use_links_) return 0;
  double total = 0;
  for (int phase = 0; phase < kPhases; ++phase) {
    double worst = 0;
    for (int32_t m : members) worst = std::max(worst, MemberTransferMs(n, m, phase));
    total += worst;
  }
  return total;
}

double AllreduceModel::LinkLatencyMs(int32_t from, int32_t to) const {
  if (step_latency_ms_ >= 0) return step_latency_ms_;
  return std::max(links_.at(static_cast<size_t>(from)).latency_ms,
                  links_.at(static_cast<size_t>(to)).latency_ms);
}

double AllreduceModel::HelloMs(std::span<const int32_t> members) const {
  if (!enabled() || members.size() <= 1) return 0;
  if (step_latency_ms_ >= 0) return step_latency_ms_;
  double lat = 0;
  for (int32_t m : members) lat = std::max(lat, links_.at(static_cast<size_t>(m)).latency_ms);
  return lat;
}

double AllreduceModel::ChunkBytes(size_t members) const {
  if (members == 0) return 0;
  const auto n = static_cast<int64_t>(members);
  const auto chunk = static_cast<double>((parameters_ + n - 1) / n);
  // int8: a float32 scale, then one byte per parameter (models/ring_allreduce.h).
  return int8_ ? 4.0 + chunk : 4.0 * chunk;
}

double AllreduceModel::TailMs(size_t members) const {
  if (!enabled() || members <= 1) return 0;
  return Primaries(members) * ReduceElements(members) * reduce_ns_ / 1e6 + fixed_ms_;
}

double AllreduceModel::LatencyMs(std::span<const int32_t> members) const {
  const size_t n = members.size();
  if (!enabled() || n <= 1) return 0;
  double phases = 0;  // per phase: max over members of (latency + its transfers)
  for (int phase = 0; phase < kPhases; ++phase) phases += PhaseMs(members, phase);
  return phases - TransferMs(members) + HelloMs(members) + VerifyMs(members);
}

double AllreduceModel::RingMs(std::span<const int32_t> members) const {
  if (!enabled() || members.size() <= 1) return 0;
  return TransferMs(members) + LatencyMs(members) + TailMs(members.size());
}

}  // namespace loft::sim
