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
double MsPerSample(double bytes, double mbps) {
  return bytes * 8.0 / (mbps * 1000.0);
}
}  // namespace

Status Policy::RestoreMemory(const PolicyMemory& memory) {
  if (memory.empty()) return OkStatus();
  return InvalidArgument(fmt::format("policy {} keeps no memory, but the snapshot has a table '{}'", name(),
                                     memory.begin()->first));
}

SampleCoding CodingFromSpec(const ClusterSpec& spec) {
  SampleCoding c;
  if (spec.dataset.encoding == DatasetEncoding::kRaw) return c;
  c.encoded = true;
  c.encoded_bytes = SampleWireBytes(spec.dataset);
  c.decoded_bytes = DecodedWireBytes(spec.dataset);
  c.placement = spec.dataset.decode_placement == DecodePlacementKind::kAuto ? DecodePlacement::kAuto
                                                                            : DecodePlacement::kTrainer;
  return c;
}

DecodeCost DecodePriorFromSpec(const ClusterSpec& spec, int node) {
  DecodeCost d;
  if (spec.dataset.encoding == DatasetEncoding::kRaw) return d;
  const NodeSpec& n = spec.nodes[static_cast<size_t>(node)];
  const double cores = n.compute.cpu_cores > 0 ? std::min(1.0, n.compute.cpu_cores) : 1.0;
  d.per_sample_ms = n.decode.per_sample_ms / cores;
  d.per_kb_ms = n.decode.per_kb_ms / cores;
  return d;
}

double DecodeMsPerSample(const DecodeCost& d, double encoded_bytes) {
  return d.per_sample_ms + d.per_kb_ms * encoded_bytes / 1024.0;
}

CostParams PriorFromSpec(const ClusterSpec& spec, int node) {
  const NodeSpec& n = spec.nodes[node];
  const double s = SampleWireBytes(spec.dataset);
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

namespace {
// A worker's iteration whose read stage also takes `decode_ms` after its
// reads (PredictMs: none).
double PredictWithDecode(const CostParams& c, int64_t local, int64_t remote, bool overlap, double decode_ms) {
  double read = std::max(LocalReadMs(c, local), RemoteReadMs(c, remote));
  if (decode_ms != 0) read += decode_ms;
  const double compute = ComputeMs(c, local + remote);
  return overlap ? std::max(read, compute) : read + compute;
}
}  // namespace

double PredictMs(const CostParams& c, int64_t local, int64_t remote, bool overlap) {
  return PredictWithDecode(c, local, remote, overlap, 0);
}

double PredictMsDecodingAtTrainer(const CostParams& c, const DecodeCost& d, const SampleCoding& coding,
                                  int64_t local, int64_t remote, bool overlap) {
  if (!coding.encoded) return PredictMs(c, local, remote, overlap);
  return PredictWithDecode(c, local, remote, overlap,
                           DecodeMsPerSample(d, coding.encoded_bytes) * static_cast<double>(local + remote));
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
    if (BadCost(w.decode.per_sample_ms) || BadCost(w.decode.per_kb_ms)) {
      return InvalidArgument(
          fmt::format("workers[{}] (node {}): decode costs must be finite and >= 0", i, w.node));
    }
    sum_min += w.min_batch;
    sum_max += w.max_batch;
  }
  if (req.coding.encoded) {
    if (!std::isfinite(req.coding.encoded_bytes) || !(req.coding.encoded_bytes > 0) ||
        !std::isfinite(req.coding.decoded_bytes) || !(req.coding.decoded_bytes > 0)) {
      return InvalidArgument(fmt::format(
          "coding: encoded samples need finite encoded_bytes > 0 and decoded_bytes > 0, got {} and {}",
          req.coding.encoded_bytes, req.coding.decoded_bytes));
    }
  } else if (req.coding.placement != DecodePlacement::kTrainer) {
    return InvalidArgument("coding: decode placement auto needs encoded samples");
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

namespace {
// The coded model's iteration time (plan.h header): `remote` samples read
// from peers, `remote_link` of them in encoded-sample units (R^e + ρ·R^d),
// `decode_ms` the node's decode work (D), `floor_ms` the busiest serving
// peer's U_j (only when remote > 0).
double CodedMs(const CostParams& c, double local, double remote, double remote_link, double decode_ms,
               double floor_ms, bool overlap) {
  const double tl = local > 0 ? c.local_fixed_ms + c.local_per_sample_ms * local : 0.0;
  const double tr = remote > 0 ? c.remote_fixed_ms + c.remote_per_sample_ms * remote_link : 0.0;
  const double read = std::max(tl, tr) + decode_ms;
  const double compute = c.compute_fixed_ms + c.compute_per_sample_ms * (local + remote);
  const double t = overlap ? std::max(read, compute) : read + compute;
  return remote > 0 ? std::max(t, floor_ms) : t;
}
}  // namespace

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
    if (req.coding.encoded) {
      // Global-shuffle policies never choose: every sample is decoded by
      // its trainer (header comment), on the read stage.
      const CostParams& c = req.workers[i].cost;
      const double decode =
          DecodeMsPerSample(req.workers[i].decode, req.coding.encoded_bytes) * (loc[i] + rem[i]);
      wp.predicted_ms = CodedMs(c, loc[i], rem[i], rem[i], decode, floor_ms, req.overlap);
    } else {
      wp.predicted_ms = PredictMsWithUplink(req.workers[i].cost, loc[i], rem[i], floor_ms, req.overlap);
    }
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

namespace {
bool DecodedFrom(const WorkerPlan& wp, int32_t peer) {
  return std::binary_search(wp.decoded_from.begin(), wp.decoded_from.end(), peer);
}

// EvaluateLocalityPlan with encoded samples (plan.h header, "Encoded samples").
void EvaluateCodedPlan(const PlanRequest& req, Plan& plan) {
  const NodeIndex index(req.workers);
  const size_t n = req.workers.size();
  const double rho = req.coding.ratio();
  std::vector<double> delta(n), served_e(n, 0.0), served_d(n, 0.0);
  for (size_t k = 0; k < n; ++k)
    delta[k] = DecodeMsPerSample(req.workers[k].decode, req.coding.encoded_bytes);
  for (const WorkerPlan& wp : plan.workers) {
    for (const auto& [peer, count] : wp.remote_from) {
      const int32_t k = index.Find(peer);
      if (k < 0) continue;
      (DecodedFrom(wp, peer) ? served_d : served_e)[static_cast<size_t>(k)] += static_cast<double>(count);
    }
  }
  std::vector<double> uplink(n);
  for (size_t k = 0; k < n; ++k) {
    uplink[k] =
        delta[k] * served_d[k] + (served_e[k] + rho * served_d[k]) * req.workers[k].cost.uplink_per_sample_ms;
  }
  plan.makespan_ms = 0;
  for (size_t i = 0; i < plan.workers.size() && i < n; ++i) {
    WorkerPlan& wp = plan.workers[i];
    double floor_ms = 0;
    double decoded = 0;
    for (const auto& [peer, count] : wp.remote_from) {
      const int32_t k = index.Find(peer);
      if (k < 0 || count <= 0) continue;
      if (DecodedFrom(wp, peer)) decoded += static_cast<double>(count);
      floor_ms = std::max(floor_ms, uplink[static_cast<size_t>(k)]);
    }
    const double local = static_cast<double>(wp.local);
    const double remote = static_cast<double>(wp.remote);
    const double encoded = std::max(0.0, remote - decoded);
    const double decode_ms = delta[i] * (local + encoded + served_d[i]);
    wp.predicted_ms = CodedMs(req.workers[i].cost, local, remote, encoded + rho * decoded, decode_ms,
                              floor_ms, req.overlap);
    plan.makespan_ms = std::max(plan.makespan_ms, wp.predicted_ms);
  }
}
}  // namespace

void EvaluateLocalityPlan(const PlanRequest& req, Plan& plan) {
  if (req.coding.encoded) {
    EvaluateCodedPlan(req, plan);
    return;
  }
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

namespace {
struct PlanScore {
  double makespan = 0;
  double total = 0;
};

PlanScore Score(const PlanRequest& req, Plan& plan) {
  EvaluateLocalityPlan(req, plan);
  PlanScore s{plan.makespan_ms, 0.0};
  for (const WorkerPlan& wp : plan.workers) s.total += wp.predicted_ms;
  return s;
}

// Lexicographically better by more than rounding noise.
bool Better(const PlanScore& a, const PlanScore& b) {
  const double tol_m = 1e-9 * std::max(1.0, b.makespan);
  if (a.makespan < b.makespan - tol_m) return true;
  if (a.makespan > b.makespan + tol_m) return false;
  return a.total < b.total - 1e-9 * std::max(1.0, b.total);
}

void Toggle(std::vector<int32_t>& set, int32_t peer) {
  auto it = std::lower_bound(set.begin(), set.end(), peer);
  if (it != set.end() && *it == peer) {
    set.erase(it);
  } else {
    set.insert(it, peer);
  }
}
}  // namespace

void ChooseDecodePlacement(const PlanRequest& req, Plan& plan) {
  for (WorkerPlan& wp : plan.workers) wp.decoded_from.clear();
  PlanScore best = Score(req, plan);
  if (!req.coding.encoded || req.coding.placement != DecodePlacement::kAuto) return;
  std::vector<std::pair<size_t, int32_t>> pairs;  // (worker index, serving node)
  for (size_t i = 0; i < plan.workers.size(); ++i) {
    for (const auto& [peer, count] : plan.workers[i].remote_from) {
      if (count > 0) pairs.emplace_back(i, peer);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  // First-improvement passes over the pairs: O(passes · pairs · plan size).
  size_t budget = 4 * pairs.size() + 16;
  bool changed = true;
  for (int pass = 0; changed && pass < 8 && budget > 0; ++pass) {
    changed = false;
    for (const auto& [i, peer] : pairs) {
      if (budget == 0) break;
      std::vector<int32_t>& set = plan.workers[i].decoded_from;
      Toggle(set, peer);
      const PlanScore s = Score(req, plan);
      if (Better(s, best)) {
        best = s;
        changed = true;
        --budget;
      } else {
        Toggle(set, peer);
      }
    }
  }
  EvaluateLocalityPlan(req, plan);
}

PlanRequest FoldTrainerDecode(const PlanRequest& req, bool into_compute) {
  PlanRequest out = req;
  if (!req.coding.encoded) return out;
  for (WorkerInput& w : out.workers) {
    const double delta = DecodeMsPerSample(w.decode, req.coding.encoded_bytes);
    if (req.overlap && !into_compute) {
      w.cost.local_per_sample_ms += delta;
      w.cost.remote_per_sample_ms += delta;
    } else {
      w.cost.compute_per_sample_ms += delta;
    }
  }
  out.coding = SampleCoding{};  // the plain model on the folded costs
  return out;
}

PlanRequest RelaxDecode(const PlanRequest& req) {
  PlanRequest out = req;
  if (!req.coding.encoded) return out;
  const bool choose = req.coding.placement == DecodePlacement::kAuto;
  const double rho = req.coding.ratio();
  for (WorkerInput& w : out.workers) {
    const double delta = DecodeMsPerSample(w.decode, req.coding.encoded_bytes);
    CostParams& c = w.cost;
    const double r1 = c.remote_per_sample_ms;
    const double u = c.uplink_per_sample_ms;
    c.local_per_sample_ms += delta;
    c.remote_per_sample_ms = choose ? std::min(r1 + delta, rho * r1) : r1 + delta;
    c.uplink_per_sample_ms = choose ? std::min(u, rho * u + delta) : u;
  }
  out.coding = SampleCoding{};  // the plain model on the relaxed costs
  return out;
}

PlanRequest FirstIterationRequest(const ClusterSpec& spec, const Placement& placement) {
  PlanRequest req;
  req.global_batch = spec.training.global_batch;
  req.overlap = spec.training.overlap;
  req.coding = CodingFromSpec(spec);
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
    w.decode = DecodePriorFromSpec(spec, i);
    req.workers.push_back(w);
  }
  return req;
}

}  // namespace loft::sched
