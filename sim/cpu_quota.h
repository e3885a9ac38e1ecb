// CpuQuota: a fluid model of one agent's CFS CPU quota (the testbed's
// `compute.cpu_cores`, tools/loftctl/testbed.cc), for the agent's own CPU
// work (core/cluster_spec.h AgentSpec). The kernel lets a cgroup run
// `quota` of CPU per `period`, then throttles it until the period ends; an
// idle agent's first millisecond of work thus runs at full speed, a busy
// one's at cpu_cores on average. Modelled as a bucket of CPU time holding
// at most one period's quota (cpu_cores · period), refilled at cpu_cores
// per ms: work runs at one core while the bucket has time in it (draining
// it at 1 − cpu_cores), at cpu_cores once it is empty. Work items run one
// after another (the agent's threads share its quota). What the agent
// uses whatever it does (`idle_cores`) is taken off both the rate and the
// bucket, leaving at least a tenth of the quota.
//
// Not responsible for: the host's other cores (agents without a quota are
// not charged), which work an agent does (sim/simulator_agent.cc).
// Thread-safety: not thread-safe; one per simulated node.
#pragma once

namespace loft::sim {

class CpuQuota {
 public:
  CpuQuota() = default;  // no quota: Run costs nothing
  // `cores` > 0, `period_ms` > 0, `idle_cores` >= 0. Starts with a full bucket.
  CpuQuota(double cores, double period_ms, double idle_cores = 0);

  bool enabled() const { return cores_ > 0; }
  // Queues `work_ms` of CPU at `now_ms`; returns when it is done (now_ms
  // when disabled or work_ms <= 0). Calls come in non-decreasing now_ms.
  double Run(double now_ms, double work_ms);
  // Time still in the bucket at `now_ms` (after the work queued so far).
  double TokensAt(double now_ms) const;

 private:
  double cores_ = 0;
  double capacity_ms_ = 0;  // cores · period
  double tokens_ms_ = 0;    // in the bucket at busy_until_ms_
  double busy_until_ms_ = 0;
};

}  // namespace loft::sim
