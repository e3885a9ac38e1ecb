// Test helpers for the scheduler-state tests: a hand-written fake Policy
// with public fields and a small heterogeneous cluster spec.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "scheduler/plan.h"
#include "scheduler/scheduler_state.h"

namespace loft::sched::testing {

// Splits B evenly (respecting min/max); locality-aware mode asks each
// worker to read min(batch, local_available) locally and the rest from the
// next workers in node order. Records every request and observation.
class FakePolicy : public Policy {
 public:
  explicit FakePolicy(bool locality) : locality(locality) {}
  std::string_view name() const override { return locality ? "fake-local" : "fake-shuffle"; }
  bool locality_aware() const override { return locality; }
  StatusOr<Plan> PlanIteration(const PlanRequest& req) override {
    requests.push_back(req);
    Plan plan;
    plan.policy = std::string(name());
    const auto n = static_cast<int64_t>(req.workers.size());
    int64_t left = req.global_batch;
    for (int64_t i = 0; i < n; ++i) {
      WorkerPlan w;
      w.node = req.workers[i].node;
      w.batch = std::clamp(left / (n - i), req.workers[i].min_batch, req.workers[i].max_batch);
      w.batch = std::min(w.batch, left);
      left -= w.batch;
      plan.workers.push_back(w);
    }
    for (int64_t i = 0; i < n && left > 0; ++i) {  // max_batch leftovers
      const int64_t add = std::min(left, req.workers[i].max_batch - plan.workers[i].batch);
      plan.workers[i].batch += add;
      left -= add;
    }
    for (int64_t i = 0; i < n; ++i) {
      WorkerPlan& w = plan.workers[i];
      if (locality) {
        w.local = std::min(w.batch, req.workers[i].local_available);
        w.remote = w.batch - w.local;
        int64_t r = w.remote;
        for (int64_t k = 1; k < n && r > 0; ++k) {
          const auto& peer = req.workers[(i + k) % n];
          const int64_t c = std::min(r, std::max<int64_t>(1, peer.local_available / 2));
          w.remote_from.emplace_back(peer.node, c);
          r -= c;
        }
      }
      w.predicted_ms = PredictMs(req.workers[i].cost, w.local, w.remote, req.overlap);
      plan.makespan_ms = std::max(plan.makespan_ms, w.predicted_ms);
    }
    return plan;
  }
  void Observe(std::span<const Observation> obs) override {
    observe_calls.emplace_back(obs.begin(), obs.end());
  }

  bool locality;
  std::vector<PlanRequest> requests;
  std::vector<std::vector<Observation>> observe_calls;
};

inline ClusterSpec SmallSpec(int64_t samples, int replication, int64_t batch, int nodes = 6) {
  const std::string yaml = "dataset: {name: test, samples: " + std::to_string(samples) +
                           ", sample_bytes: 1000}\n"
                           "placement: {kind: zipf, skew: 0.7, replication: " +
                           std::to_string(replication) +
                           "}\n"
                           "training: {global_batch: " +
                           std::to_string(batch) +
                           ", min_batch: 2, overlap: false, seed: 11}\n"
                           "nodes:\n"
                           "  - name: fast\n"
                           "    count: " +
                           std::to_string(nodes / 2) +
                           "\n"
                           "    compute: {fixed_ms: 1.0, per_sample_ms: 0.05}\n"
                           "    link: {up_mbps: 100, down_mbps: 100, latency_ms: 2}\n"
                           "  - name: slow\n"
                           "    count: " +
                           std::to_string(nodes - nodes / 2) +
                           "\n"
                           "    compute: {fixed_ms: 2.0, per_sample_ms: 0.2}\n"
                           "    disk: {read_mbps: 200}\n"
                           "    link: {up_mbps: 20, down_mbps: 50, latency_ms: 5}\n";
  auto spec = ParseClusterSpec(yaml, "state-test.yaml");
  if (!spec.ok()) throw std::runtime_error(spec.status().ToString());
  return std::move(spec).value();
}

// The failure report of `p` by its worker, for `reason`.
inline loft::v1::PartitionFailed FailedReport(const loft::v1::Partition& p, const std::string& reason) {
  loft::v1::PartitionFailed f;
  f.set_partition_id(p.id());
  f.set_attempt(p.attempt());
  f.set_node(p.worker());
  f.set_reason(reason);
  return f;
}

// A timed ack for `p`: the times the spec's prior gives its reads and
// compute, scaled by `factor` (so the cost models and lbbsp's throughput
// keep learning).
inline loft::v1::PartitionDone TimedDone(const loft::v1::Partition& p, const SchedulerState& s,
                                         double factor = 1.0) {
  loft::v1::PartitionDone d;
  d.set_partition_id(p.id());
  d.set_attempt(p.attempt());
  d.set_node(p.worker());
  const auto c = PriorFromSpec(s.spec(), p.worker());
  int64_t local = 0;
  for (int32_t src : p.sources()) local += src == p.worker();
  const int64_t remote = p.sample_ids_size() - local;
  d.mutable_timings()->set_local_read_ms(factor * LocalReadMs(c, local));
  d.mutable_timings()->set_remote_read_ms(factor * RemoteReadMs(c, remote));
  d.mutable_timings()->set_compute_ms(factor * ComputeMs(c, p.sample_ids_size()));
  d.mutable_timings()->set_local_samples(local);
  d.mutable_timings()->set_remote_samples(remote);
  return d;
}

}  // namespace loft::sched::testing
