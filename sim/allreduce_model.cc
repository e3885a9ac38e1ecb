#include "sim/allreduce_model.h"

#include <algorithm>

namespace loft::sim {

int64_t ModelParameterCount(const std::string& model, int64_t input_dim) {
  constexpr int64_t kClasses = 10;
  if (model == "softmax") return input_dim * kClasses + kClasses;
  if (model == "mlp") {
    // models::ModelSpec's default hidden layers {256, 128}.
    return input_dim * 256 + 256 + 256 * 128 + 128 + 128 * kClasses + kClasses;
  }
  return 0;
}

double PriorReduceNsPerElement(const std::string& aggregation) {
  return aggregation == "mean" || aggregation == "weighted_mean" ? 1.0 : 10.0;
}

AllreduceModel::AllreduceModel(const ClusterSpec& spec) {
  const auto& t = spec.training;
  if (t.model == "none") return;
  const auto& a = t.allreduce;
  parameters_ = a.parameters > 0 ? a.parameters : ModelParameterCount(t.model, spec.dataset.sample_bytes);
  step_latency_ms_ = a.step_latency_ms;
  reduce_ns_ =
      a.reduce_ns_per_element >= 0 ? a.reduce_ns_per_element : PriorReduceNsPerElement(t.aggregation);
  fixed_ms_ = a.fixed_ms;
  use_links_ = a.links;
  links_.reserve(spec.nodes.size());
  for (const auto& n : spec.nodes) links_.push_back(n.link);
}

double AllreduceModel::ReduceElements(size_t members) const {
  if (members <= 1) return 0;
  const auto n = static_cast<int64_t>(members);
  const int64_t chunk = (parameters_ + n - 1) / n;
  return static_cast<double>((n - 1) * chunk);
}

double AllreduceModel::TransferMs(std::span<const int32_t> members) const {
  const size_t n = members.size();
  if (!enabled() || n <= 1 || !use_links_) return 0;
  const auto nn = static_cast<int64_t>(n);
  const double chunk_bytes = 4.0 * static_cast<double>((parameters_ + nn - 1) / nn);
  double step = 0;
  for (size_t i = 0; i < n; ++i) {
    const LinkSpec& from = links_.at(static_cast<size_t>(members[i]));
    const LinkSpec& to = links_.at(static_cast<size_t>(members[(i + 1) % n]));
    const double mbps = std::min(from.up_mbps, to.down_mbps);
    step = std::max(step, chunk_bytes * 8.0 / (mbps * 1000.0));
  }
  return 2.0 * static_cast<double>(n - 1) * step;
}

double AllreduceModel::StepLatencyMs(std::span<const int32_t> members) const {
  double lat = step_latency_ms_;
  if (lat < 0) {
    lat = 0;
    for (int32_t m : members) lat = std::max(lat, links_.at(static_cast<size_t>(m)).latency_ms);
  }
  return lat;
}

double AllreduceModel::ChunkBytes(size_t members) const {
  if (members == 0) return 0;
  const auto n = static_cast<int64_t>(members);
  return 4.0 * static_cast<double>((parameters_ + n - 1) / n);
}

double AllreduceModel::TailMs(size_t members) const {
  if (!enabled() || members <= 1) return 0;
  return ReduceElements(members) * reduce_ns_ / 1e6 + fixed_ms_;
}

double AllreduceModel::LatencyMs(std::span<const int32_t> members) const {
  const size_t n = members.size();
  if (!enabled() || n <= 1) return 0;
  return 2.0 * static_cast<double>(n - 1) * StepLatencyMs(members);
}

double AllreduceModel::RingMs(std::span<const int32_t> members) const {
  if (!enabled() || members.size() <= 1) return 0;
  return TransferMs(members) + LatencyMs(members) + TailMs(members.size());
}

}  // namespace loft::sim
