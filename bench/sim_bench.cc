// sim_bench: wall time and events/s of loft-sim on a cluster spec
// (default examples/clusters/large-1024.yaml, 1000 iterations, policy
// loft). Prints one JSON object with measured numbers only.
//   sim_bench [SPEC] [ITERATIONS] [POLICY]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "sim/simulator.h"

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : std::string(LOFT_SOURCE_DIR) + "/examples/clusters/large-1024.yaml";
  const int64_t iterations = argc > 2 ? std::atoll(argv[2]) : 1000;
  const std::string policy = argc > 3 ? argv[3] : "loft";
  auto spec = loft::LoadClusterSpecFile(path);
  if (!spec.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", spec.status().ToString().c_str());
    return 1;
  }
  loft::sim::SimOptions o;
  o.policy = policy;
  o.iterations = iterations;
  o.trace_iterations = 0;
  const std::clock_t c0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = loft::sim::RunPolicy(*spec, o);
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  if (!r.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", r.status().ToString().c_str());
    return 1;
  }
  const double wall_s = std::chrono::duration<double>(t1 - t0).count();
  nlohmann::ordered_json j;
  j["bench"] = "sim";
  j["spec"] = path;
  j["nodes"] = spec->num_nodes();
  j["policy"] = policy;
  j["iterations"] = static_cast<int64_t>(r->iterations.size());
  j["events"] = r->events;
  j["wall_s"] = wall_s;
  j["cpu_s"] = cpu_s;  // process CPU time: wall_s on a shared machine includes waiting for a core
  j["events_per_s"] = wall_s > 0 ? static_cast<double>(r->events) / wall_s : 0.0;
  j["iterations_per_s"] = wall_s > 0 ? static_cast<double>(r->iterations.size()) / wall_s : 0.0;
  j["simulated_s"] = r->summary.total_s;
  j["mean_iteration_ms"] = r->summary.mean_iteration_ms;
  j["epochs_completed"] = r->summary.epochs_completed;
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}
