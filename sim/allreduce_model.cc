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

namespace {
// Transfer time of `bytes` of payload over from→to (ms), at the links'
// payload rate (network.packet_efficiency of the link rate).
double LinkTransferMs(const LinkSpec& from, const LinkSpec& to, double bytes, double efficiency) {
  return bytes * 8.0 / (std::min(from.up_mbps, to.down_mbps) * efficiency * 1000.0);
}
}  // namespace

int AllreduceModel::Primaries(size_t members) const {
  return tolerance_ > 0 ? static_cast<int>(std::min<size_t>(static_cast<size_t>(tolerance_) + 1, members))
                        : 1;
}

double AllreduceModel::StepChunkBytes(size_t members, int step) const {
  const int r1 = Primaries(members);
  if (r1 <= 1) return ChunkBytes(members);
  if (step < static_cast<int>(members) - 1) return r1 * ChunkBytes(members);  // scatter
  return ChunkBytes(members) + 32.0 * (r1 - 1);                               // gather: a copy and digests
}

double AllreduceModel::VerifyMs(std::span<const int32_t> members) const {
  return Primaries(members.size()) > 1 ? HelloMs(members) : 0.0;
}

double AllreduceModel::TransferMs(std::span<const int32_t> members) const {
  const size_t n = members.size();
  if (!enabled() || n <= 1 || !use_links_) return 0;
  double total = 0;
  for (int s = 0; s < 2 * static_cast<int>(n - 1); ++s) {
    const double bytes = StepWireBytes(n, s);
    double step = 0;
    for (size_t i = 0; i < n; ++i) {
      step = std::max(
          step, LinkTransferMs(links_.at(static_cast<size_t>(members[i])),
                               links_.at(static_cast<size_t>(members[(i + 1) % n])), bytes, efficiency_));
    }
    total += step;
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
  double steps = 0;  // per step: max over links of (transfer + latency)
  for (int s = 0; s < 2 * static_cast<int>(n - 1); ++s) {
    const double bytes = StepWireBytes(n, s);
    double step = 0;
    for (size_t i = 0; i < n; ++i) {
      const int32_t from = members[i], to = members[(i + 1) % n];
      const double t = use_links_ ? LinkTransferMs(links_.at(static_cast<size_t>(from)),
                                                   links_.at(static_cast<size_t>(to)), bytes, efficiency_)
                                  : 0.0;
      step = std::max(step, t + LinkLatencyMs(from, to));
    }
    steps += step;
  }
  return steps - TransferMs(members) + HelloMs(members) + VerifyMs(members);
}

double AllreduceModel::RingMs(std::span<const int32_t> members) const {
  if (!enabled() || members.size() <= 1) return 0;
  return TransferMs(members) + LatencyMs(members) + TailMs(members.size());
}

}  // namespace loft::sim
