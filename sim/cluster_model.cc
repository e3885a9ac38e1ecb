#include "sim/cluster_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/placement.h"

namespace loft::sim {

namespace {
// Standard normal draw (Box–Muller) from a SplitMix64 stream: identical on
// every platform, unlike std::normal_distribution.
double NormalDraw(uint64_t& state) {
  const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}
}  // namespace

ClusterModel::ClusterModel(const ClusterSpec& spec, uint64_t seed)
    : step_seed_(Mix64(seed ^ 0x5eed5eed5eed5eedULL)),
      request_overhead_ms_(spec.network.request_overhead_ms),
      sample_bytes_(std::llround(SampleWireBytes(spec.dataset))),
      record_overhead_bytes_(spec.network.record_overhead_bytes),
      decoded_bytes_(DecodedWireBytes(spec.dataset)) {
  nodes_.reserve(spec.nodes.size());
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& n = spec.nodes[i];
    Node m;
    m.fixed_ms = n.compute.fixed_ms;
    m.per_sample_ms = n.compute.per_sample_ms;
    m.jitter = n.compute.jitter;
    m.jitter_kind = n.compute.jitter_kind;
    m.jitter_shared = n.compute.jitter_shared;
    m.disk = BytesPerMs(n.disk.read_mbps);
    m.up = BytesPerMs(n.link.up_mbps) * spec.network.packet_efficiency;
    m.down = BytesPerMs(n.link.down_mbps) * spec.network.packet_efficiency;
    // The links' token buckets (core/cluster_spec.h LinkBurstBytes) are in
    // link bytes; the flows carry payload.
    auto burst = [&](double mbps) {
      return LinkBurstBytes(spec.network, mbps) * spec.network.packet_efficiency;
    };
    m.up_burst = burst(n.link.up_mbps);
    m.down_burst = burst(n.link.down_mbps);
    m.latency_ms = n.link.latency_ms;
    m.slowdowns = n.slowdowns;
    for (const FailureSpec& f : n.failures)
      m.outages.push_back({f.at_s * 1000.0, (f.at_s + f.down_s) * 1000.0});
    std::sort(m.outages.begin(), m.outages.end(),
              [](const Outage& a, const Outage& b) { return a.start_ms < b.start_ms; });
    m.byzantine = n.byzantine;
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ULL * (i + 1));
    m.rng = SplitMix64(s);
    nodes_.push_back(std::move(m));
  }
}

double ClusterModel::NominalComputeMs(int node, int64_t batch, double start_ms) const {
  const Node& n = nodes_[node];
  double t = n.fixed_ms + n.per_sample_ms * static_cast<double>(batch);
  for (const SlowdownSpec& s : n.slowdowns) {
    if (start_ms >= s.at_s * 1000.0 && start_ms < (s.at_s + s.for_s) * 1000.0) t *= s.factor;
  }
  return t;
}

double ClusterModel::ComputeMs(int node, int64_t batch, double start_ms, int64_t iteration) {
  Node& n = nodes_[node];
  const double nominal = NominalComputeMs(node, batch, start_ms);
  if (n.jitter <= 0) return nominal;
  double z = NormalDraw(n.rng);
  if (n.jitter_shared > 0) {
    // The step's draw: the same for every node, whatever order they draw in.
    uint64_t step = step_seed_ ^ Mix64(static_cast<uint64_t>(iteration));
    z = std::sqrt(n.jitter_shared) * NormalDraw(step) + std::sqrt(1 - n.jitter_shared) * z;
  }
  return nominal * JitterFactor(n.jitter, n.jitter_kind, z);
}

double ClusterModel::LocalReadMs(int node, int64_t samples) const {
  if (samples <= 0) return 0.0;
  return static_cast<double>(samples) * static_cast<double>(sample_bytes_) / nodes_[node].disk;
}

std::vector<double> ClusterModel::UpRates() const {
  std::vector<double> r;
  for (const Node& n : nodes_) r.push_back(n.up);
  return r;
}

std::vector<double> ClusterModel::DownRates() const {
  std::vector<double> r;
  for (const Node& n : nodes_) r.push_back(n.down);
  return r;
}

std::vector<double> ClusterModel::UpBursts() const {
  std::vector<double> r;
  for (const Node& n : nodes_) r.push_back(n.up_burst);
  return r;
}

std::vector<double> ClusterModel::DownBursts() const {
  std::vector<double> r;
  for (const Node& n : nodes_) r.push_back(n.down_burst);
  return r;
}

bool ClusterModel::IsDown(int node, double at_ms) const {
  for (const Outage& o : nodes_[node].outages) {
    if (at_ms >= o.start_ms && at_ms < o.end_ms) return true;
  }
  return false;
}

}  // namespace loft::sim
