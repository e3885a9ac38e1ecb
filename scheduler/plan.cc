#include "scheduler/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "core/placement.h"

namespace loft::sched {

namespace {
// Milliseconds to move `bytes` at `mbps` megabits per second.
double MsPerSample(int64_t bytes, double mbps) {
  return static_cast<double>(bytes) * 8.0 / (mbps * 1000.0);
}
}  // namespace

Status Policy::RestoreMemory(const PolicyMemory& memory) {
  if (memory.empty()) return OkStatus();
  return InvalidArgument(fmt::format("policy {} keeps no memory, but the snapshot has a table '{}'", name(),
                                     memory.begin()->first));
}

CostParams PriorFromSpec(const ClusterSpec& spec, int node) {
  const NodeSpec& n = spec.nodes[node];
  const int64_t s = spec.dataset.sample_bytes;
  CostParams c;
  c.compute_fixed_ms = n.compute.fixed_ms;
  c.compute_per_sample_ms = n.compute.per_sample_ms;
  c.local_fixed_ms = 0;
  c.local_per_sample_ms = MsPerSample(s, n.disk.read_mbps);
  c.remote_fixed_ms = n.link.latency_ms + spec.network.request_overhead_ms;
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

namespace {
bool BadCost(double v) {
  return !std::isfinite(v) || v < 0;
}
}  // namespace

Status ValidatePlanRequest(const PlanRequest& req) {
  if (req.global_batch <= 0)
    return InvalidArgument(fmt::format("global_batch must be > 0, got {}", req.global_batch));
  if (req.workers.empty()) return InvalidArgument("plan request has no workers");
  std::unordered_set<int32_t> seen;
  int64_t sum_min = 0;
  int64_t sum_max = 0;
  for (size_t i = 0; i < req.workers.size(); ++i) {
    const WorkerInput& w = req.workers[i];
    const CostParams& c = w.cost;
    if (!seen.insert(w.node).second)
      return InvalidArgument(fmt::format("workers[{}]: node {} listed twice", i, w.node));
    if (BadCost(c.compute_fixed_ms) || BadCost(c.compute_per_sample_ms) || BadCost(c.local_fixed_ms) ||
        BadCost(c.local_per_sample_ms) || BadCost(c.remote_fixed_ms) || BadCost(c.remote_per_sample_ms) ||
        BadCost(c.uplink_per_sample_ms)) {
      return InvalidArgument(
          fmt::format("workers[{}] (node {}): cost parameters must be finite and >= 0", i, w.node));
    }
    if (w.min_batch < 0 || w.max_batch < w.min_batch) {
      return InvalidArgument(
          fmt::format("workers[{}] (node {}): need 0 <= min_batch <= max_batch, got min {} max {}", i, w.node,
                      w.min_batch, w.max_batch));
    }
    if (w.exclusive_available < -1 || w.exclusive_available > w.local_available) {
      return InvalidArgument(
          fmt::format("workers[{}] (node {}): exclusive_available must be -1 (unknown) or in [0, "
                      "local_available], got {}",
                      i, w.node, w.exclusive_available));
    }
    if (w.local_available < 0) {
      return InvalidArgument(fmt::format("workers[{}] (node {}): local_available must be >= 0", i, w.node));
    }
    sum_min += w.min_batch;
    sum_max += w.max_batch;
  }
  if (sum_min > req.global_batch) {
    return InvalidArgument(fmt::format("infeasible: sum of min_batch ({}) exceeds global_batch ({})", sum_min,
                                       req.global_batch));
  }
  if (sum_max < req.global_batch) {
    return InvalidArgument(fmt::format("infeasible: sum of max_batch ({}) is below global_batch ({})",
                                       sum_max, req.global_batch));
  }
  return OkStatus();
}

double PredictMsWithUplink(const CostParams& c, double local, double remote, double uplink_floor_ms,
                           bool overlap) {
  const double tl = local > 0 ? c.local_fixed_ms + c.local_per_sample_ms * local : 0.0;
  const double tr = remote > 0 ? c.remote_fixed_ms + c.remote_per_sample_ms * remote : 0.0;
  const double read = std::max(tl, tr);
  const double compute = c.compute_fixed_ms + c.compute_per_sample_ms * (local + remote);
  const double t = overlap ? std::max(read, compute) : read + compute;
  return remote > 0 ? std::max(t, uplink_floor_ms) : t;
}

Plan EvaluateShuffle(const PlanRequest& req, Plan plan) {
  const size_t n = req.workers.size();
  double pool = 0;
  for (const WorkerInput& w : req.workers) pool += static_cast<double>(w.local_available);
  const double u = std::max({static_cast<double>(req.unconsumed_in_epoch), pool, 1.0});
  std::vector<double> loc(n), rem(n), q(n);
  double q_sum = 0;
  for (size_t i = 0; i < n && i < plan.workers.size(); ++i) {
    const double p = static_cast<double>(req.workers[i].local_available);
    const double b = static_cast<double>(plan.workers[i].batch);
    loc[i] = b * std::min(1.0, p / u);
    rem[i] = b - loc[i];
    const double others = pool - p;
    q[i] = others > 0 ? rem[i] / others : 0.0;
    q_sum += q[i];
  }
  // Uplink time of each peer; keep the two largest to exclude self.
  double top1 = 0, top2 = 0;
  size_t top1_i = n;
  std::vector<double> up(n);
  for (size_t j = 0; j < n; ++j) {
    const double served = static_cast<double>(req.workers[j].local_available) * (q_sum - q[j]);
    up[j] = served * req.workers[j].cost.uplink_per_sample_ms;
    if (up[j] > top1) {
      top2 = top1;
      top1 = up[j];
      top1_i = j;
    } else if (up[j] > top2) {
      top2 = up[j];
    }
  }
  plan.makespan_ms = 0;
  for (size_t i = 0; i < n && i < plan.workers.size(); ++i) {
    WorkerPlan& wp = plan.workers[i];
    wp.node = req.workers[i].node;
    wp.local = std::min<int64_t>(wp.batch, std::llround(loc[i]));
    wp.remote = wp.batch - wp.local;
    wp.remote_from.clear();
    const double floor_ms = i == top1_i ? top2 : top1;
    wp.predicted_ms = PredictMsWithUplink(req.workers[i].cost, loc[i], rem[i], floor_ms, req.overlap);
    plan.makespan_ms = std::max(plan.makespan_ms, wp.predicted_ms);
  }
  return plan;
}

namespace {
// node id -> index in req.workers (-1: not a live worker). Node ids are
// usually indexes into the expanded cluster spec (a flat table); the C API
// lets callers pick any non-negative id, so sparse ids use a sorted table.
class NodeIndex {
 public:
  explicit NodeIndex(const std::vector<WorkerInput>& workers) {
    int32_t max_node = 0;
    for (const WorkerInput& w : workers) max_node = std::max(max_node, w.node);
    if (static_cast<size_t>(max_node) <= 4 * workers.size() + 64) {
      flat_.assign(static_cast<size_t>(max_node) + 1, -1);
      for (size_t i = 0; i < workers.size(); ++i) {
        if (workers[i].node >= 0) flat_[static_cast<size_t>(workers[i].node)] = static_cast<int32_t>(i);
      }
    } else {
      sorted_.reserve(workers.size());
      for (size_t i = 0; i < workers.size(); ++i)
        sorted_.emplace_back(workers[i].node, static_cast<int32_t>(i));
      std::sort(sorted_.begin(), sorted_.end());
    }
  }
  int32_t Find(int32_t node) const {
    if (!flat_.empty() || sorted_.empty()) {
      return node >= 0 && static_cast<size_t>(node) < flat_.size() ? flat_[static_cast<size_t>(node)] : -1;
    }
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::make_pair(node, int32_t{-1}));
    return it != sorted_.end() && it->first == node ? it->second : -1;
  }

 private:
  std::vector<int32_t> flat_;
  std::vector<std::pair<int32_t, int32_t>> sorted_;
};
}  // namespace

void EvaluateLocalityPlan(const PlanRequest& req, Plan& plan) {
  const NodeIndex index(req.workers);
  auto find = [&](int32_t peer) { return index.Find(peer); };
  std::vector<double> served(req.workers.size(), 0.0);
  for (const WorkerPlan& wp : plan.workers) {
    for (const auto& [peer, count] : wp.remote_from) {
      const int32_t k = find(peer);
      if (k >= 0) served[static_cast<size_t>(k)] += static_cast<double>(count);
    }
  }
  plan.makespan_ms = 0;
  for (size_t i = 0; i < plan.workers.size() && i < req.workers.size(); ++i) {
    WorkerPlan& wp = plan.workers[i];
    double floor_ms = 0;
    for (const auto& [peer, count] : wp.remote_from) {
      const int32_t k = find(peer);
      if (k < 0 || count <= 0) continue;
      floor_ms = std::max(floor_ms, served[static_cast<size_t>(k)] *
                                        req.workers[static_cast<size_t>(k)].cost.uplink_per_sample_ms);
    }
    wp.predicted_ms = PredictMsWithUplink(req.workers[i].cost, static_cast<double>(wp.local),
                                          static_cast<double>(wp.remote), floor_ms, req.overlap);
    plan.makespan_ms = std::max(plan.makespan_ms, wp.predicted_ms);
  }
}

PlanRequest FirstIterationRequest(const ClusterSpec& spec, const Placement& placement) {
  PlanRequest req;
  req.global_batch = spec.training.global_batch;
  req.overlap = spec.training.overlap;
  req.epoch = 0;
  req.iteration = 0;
  req.unconsumed_in_epoch = spec.dataset.samples;
  req.iterations_left_in_epoch =
      req.global_batch > 0 ? (spec.dataset.samples + req.global_batch - 1) / req.global_batch : 1;
  for (int i = 0; i < spec.num_nodes(); ++i) {
    WorkerInput w;
    w.node = i;
    w.cost = PriorFromSpec(spec, i);
    w.min_batch = spec.training.min_batch;
    w.max_batch = spec.MaxBatch(i);
    w.local_available = i < placement.num_nodes() ? static_cast<int64_t>(placement.SamplesOf(i).size()) : 0;
    // Every sample has `replication` distinct holders, all live here.
    w.exclusive_available = placement.replication() == 1 ? w.local_available : 0;
    req.workers.push_back(w);
  }
  return req;
}

}  // namespace loft::sched
