#include "scheduler/plan.h"

#include <algorithm>

namespace loft::sched {

namespace {
// Milliseconds to move `bytes` at `mbps` megabits per second.
double MsPerSample(int64_t bytes, double mbps) { return static_cast<double>(bytes) * 8.0 / (mbps * 1000.0); }
}  // namespace

CostParams PriorFromSpec(const ClusterSpec& spec, int node) {
  const NodeSpec& n = spec.nodes[node];
  const int64_t s = spec.dataset.sample_bytes;
  CostParams c;
  c.compute_fixed_ms = n.compute.fixed_ms;
  c.compute_per_sample_ms = n.compute.per_sample_ms;
  c.local_fixed_ms = 0;
  c.local_per_sample_ms = MsPerSample(s, n.disk.read_mbps);
  c.remote_fixed_ms = n.link.latency_ms;
  c.remote_per_sample_ms = MsPerSample(s, n.link.down_mbps);
  c.uplink_per_sample_ms = MsPerSample(s, n.link.up_mbps);
  return c;
}

double ComputeMs(const CostParams& c, int64_t batch) {
  return c.compute_fixed_ms + c.compute_per_sample_ms * static_cast<double>(batch);
}

double LocalReadMs(const CostParams& c, int64_t local) {
  return local > 0 ? c.local_fixed_ms + c.local_per_sample_ms * static_cast<double>(local) : 0.0;
}

double RemoteReadMs(const CostParams& c, int64_t remote) {
  return remote > 0 ? c.remote_fixed_ms + c.remote_per_sample_ms * static_cast<double>(remote) : 0.0;
}

double PredictMs(const CostParams& c, int64_t local, int64_t remote, bool overlap) {
  const double read = std::max(LocalReadMs(c, local), RemoteReadMs(c, remote));
  const double compute = ComputeMs(c, local + remote);
  return overlap ? std::max(read, compute) : read + compute;
}

}  // namespace loft::sched
