// state_bench: latency of the scheduler state's planning path at scale.
//
// For each (N nodes, B global batch, policy, replication) it builds a
// JobDriver over a zipf-placed dataset of `--epoch-factor`·B samples
// (default 10, so an epoch has >= 3 iterations; the measured iterations
// cross epoch boundaries), registers every worker, then repeatedly:
//   1. on the current state, times BuildPlanRequest, the policy's
//      PlanIteration (a SEPARATE policy instance of the same name, so the
//      driver's policy memory is not disturbed) and Assigner::Assign of
//      that plan on a COPY of the sampler (the copy is made untimed);
//   2. times JobDriver::PlanNextIteration (the full path: request, policy,
//      assign, partitions, apply);
//   3. times the acks: OnPartitionSent + OnPartitionDone for every
//      partition of the iteration (incl. the EpochAdvanced at an epoch end).
// Reports medians (and max) in ms. "rest" = plan − policy − assign − request.
//   state_bench [--reps R] [--max-nodes N] [--epoch-factor F] [--policies uniform,loft]
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "scheduler/assigner.h"
#include "scheduler/driver.h"
#include "scheduler/plan.h"

namespace {
using SteadyClock = std::chrono::steady_clock;
using namespace loft;
using namespace loft::sched;

double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

ClusterSpec MakeSpec(int nodes, int64_t batch, int64_t samples, int replication) {
  const int fast = nodes / 2;
  std::ostringstream y;
  y << "dataset: {name: bench, samples: " << samples << ", sample_bytes: 4000}\n"
    << "placement: {kind: zipf, skew: 0.7, replication: " << replication << "}\n"
    << "training: {global_batch: " << batch << ", min_batch: 1, overlap: false, seed: 7}\n"
    << "nodes:\n"
    << "  - name: fast\n    count: " << fast << "\n"
    << "    compute: {fixed_ms: 1.0, per_sample_ms: 0.05}\n"
    << "    link: {up_mbps: 100, down_mbps: 100, latency_ms: 2}\n"
    << "  - name: slow\n    count: " << nodes - fast << "\n"
    << "    compute: {fixed_ms: 2.0, per_sample_ms: 0.2}\n"
    << "    disk: {read_mbps: 200}\n"
    << "    link: {up_mbps: 20, down_mbps: 50, latency_ms: 5}\n";
  auto spec = ParseClusterSpec(y.str(), "state-bench.yaml");
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(spec).value();
}

template <class T>
T OrDie(StatusOr<T> s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(s).value();
}

nlohmann::json RunOne(int nodes, int64_t batch, const std::string& policy, int replication, int reps,
                      int64_t epoch_factor) {
  const int64_t samples = epoch_factor * batch;
  const ClusterSpec spec = MakeSpec(nodes, batch, samples, replication);
  StateOptions opts;
  opts.timeout_min_ms = 0;  // no deadlines: nothing times out in the bench
  const auto setup0 = SteadyClock::now();
  auto drv = OrDie(JobDriver::Create(spec, policy, opts), "create");
  for (int n = 0; n < nodes; ++n) OrDie(drv->RegisterWorker(n, 0), "register");
  const double setup_ms = Ms(SteadyClock::now() - setup0);
  auto shadow = OrDie(MakePolicy(policy), "policy");

  std::vector<double> request_ms, policy_ms, assign_ms, plan_ms, ack_ms, rest_ms;
  int64_t assigned = 0, epochs = 0, policy_failures = 0;
  double now = 0;
  for (int r = 0; r < reps; ++r) {
    const SchedulerState& st = drv->state();
    // (1) components on the current state.
    double t_req = 0, t_pol = 0, t_asg = 0;
    if (!st.sampler().EpochDone()) {
      auto t0 = SteadyClock::now();
      PlanRequest req = OrDie(st.BuildPlanRequest(), "request");
      auto t1 = SteadyClock::now();
      StatusOr<Plan> plan = shadow->PlanIteration(req);
      auto t2 = SteadyClock::now();
      t_req = Ms(t1 - t0);
      t_pol = Ms(t2 - t1);
      if (plan.ok()) {
        EpochSampler copy = st.sampler();
        auto t3 = SteadyClock::now();
        auto a = Assigner::Assign(*plan, req, shadow->locality_aware(), st.placement(), st.live_mask(), copy);
        auto t4 = SteadyClock::now();
        if (a.ok()) t_asg = Ms(t4 - t3);
      }
    }
    // (2) the full planning path.
    auto p0 = SteadyClock::now();
    Updates u = OrDie(drv->PlanNextIteration(now), "plan");
    auto p1 = SteadyClock::now();
    const auto parts = JobDriver::PartitionsToSend(u);
    if (parts.empty()) {
      std::fprintf(stderr, "blocked: %s\n", drv->BlockedReason().c_str());
      std::exit(1);
    }
    // (3) acks.
    auto a0 = SteadyClock::now();
    for (const auto& p : parts) {
      OrDie(drv->OnPartitionSent(p.id(), p.attempt(), now), "sent");
      loft::v1::PartitionDone d;
      d.set_partition_id(p.id());
      d.set_attempt(p.attempt());
      d.set_node(p.worker());
      d.mutable_timings()->set_local_read_ms(1.0 + 0.01 * p.sample_ids_size());
      d.mutable_timings()->set_remote_read_ms(0.5);
      d.mutable_timings()->set_compute_ms(2.0 + 0.05 * p.sample_ids_size());
      for (const auto& up : OrDie(drv->OnPartitionDone(d, now + 10), "done")) {
        if (up.has_epoch_advanced()) ++epochs;
      }
    }
    auto a1 = SteadyClock::now();
    for (const auto& up : u) {
      if (up.has_iteration_planned()) {
        assigned += up.iteration_planned().global_batch();
        if (!up.iteration_planned().policy_error().empty()) ++policy_failures;
      }
    }
    now += 100;
    const double plan = Ms(p1 - p0);
    request_ms.push_back(t_req);
    policy_ms.push_back(t_pol);
    assign_ms.push_back(t_asg);
    plan_ms.push_back(plan);
    ack_ms.push_back(Ms(a1 - a0));
    rest_ms.push_back(std::max(0.0, plan - t_req - t_pol - t_asg));
  }
  nlohmann::json j;
  j["nodes"] = nodes;
  j["global_batch"] = batch;
  j["samples"] = samples;
  j["policy"] = policy;
  j["replication"] = replication;
  j["iterations"] = reps;
  j["epochs_completed"] = epochs;
  j["samples_assigned"] = assigned;
  j["policy_failures"] = policy_failures;
  j["setup_ms"] = setup_ms;
  j["median_ms"] = {{"plan_next_iteration", Median(plan_ms)},
                    {"acks", Median(ack_ms)},
                    {"plan_plus_acks", Median(plan_ms) + Median(ack_ms)},
                    {"request", Median(request_ms)},
                    {"policy", Median(policy_ms)},
                    {"assign", Median(assign_ms)},
                    {"rest", Median(rest_ms)}};
  j["max_ms"] = {{"plan_next_iteration", Max(plan_ms)}, {"acks", Max(ack_ms)}};
  return j;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  int max_nodes = 10000;
  int64_t epoch_factor = 10;
  std::vector<std::string> policies = {"uniform", "loft"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps") {
      reps = std::stoi(next());
    } else if (a == "--max-nodes") {
      max_nodes = std::stoi(next());
    } else if (a == "--epoch-factor") {
      epoch_factor = std::stoll(next());
    } else if (a == "--policies") {
      policies = Split(next());
    } else {
      std::fprintf(stderr,
                   "unknown flag %s\nusage: state_bench [--reps R] [--max-nodes N] "
                   "[--epoch-factor F] [--policies uniform,loft]\n",
                   a.c_str());
      return 2;
    }
  }
  if (reps < 1 || epoch_factor < 1) {
    std::fprintf(stderr, "--reps and --epoch-factor must be >= 1\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::err);
  const std::vector<std::pair<int, int64_t>> sizes = {
      {16, 1024}, {256, 16384}, {1024, 65536}, {10000, 262144}};
  nlohmann::json out;
  out["bench"] = "state_bench";
  out["reps"] = reps;
  out["epoch_factor"] = epoch_factor;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [n, b] : sizes) {
    if (n > max_nodes) continue;
    for (const auto& pol : policies) {
      for (int rep : {1, 2}) {
        rows.push_back(RunOne(n, b, pol, rep, reps, epoch_factor));
        std::fprintf(stderr, "%s\n", rows.back().dump().c_str());
      }
    }
  }
  out["results"] = std::move(rows);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
