// Scheduler overhead: per iteration, the time SchedulerService needs to
// (a) take 64 PartitionDone acks + CreditGrants, (b) plan the next
// iteration with the real policy, journal it to RocksDB and (c) stream the
// 64 PartitionAssignments through a ROUTER to 64 DEALER sockets until each
// has received its partition. Compared with the iteration time the planner
// predicts for the same cluster (the "example cluster" is homogeneous.yaml
// scaled to 64 nodes with the per-node batch kept). Prints JSON.
//   sched_overhead_bench [--iterations N] [--policy P] [--nosync] [--global-batch B]
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/cluster_spec.h"
#include "core/codec.h"
#include "core/zmq_util.h"
#include "server/service.h"

namespace {
using loft::Status;
using SteadyClock = std::chrono::steady_clock;

class RouterTransport : public loft::server::SchedulerTransport {
 public:
  explicit RouterTransport(zmq::socket_t* router) : router_(router) {}
  Status Send(int32_t node, const loft::v1::Envelope& env) override {
    std::string rid = "n" + std::to_string(node);
    zmq::message_t id(rid.data(), rid.size());
    return loft::SendEnvelopeTo(*router_, id, env, true);
  }

 private:
  zmq::socket_t* router_;
};

double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty()
             ? 0
             : v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 50;
  std::string policy = "loft";
  bool sync = true;
  int64_t global_batch = 8192;  // 128 per agent, as in homogeneous.yaml (512 over 4)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc)
      iterations = std::stoi(argv[++i]);
    else if (a == "--policy" && i + 1 < argc)
      policy = argv[++i];
    else if (a == "--nosync")
      sync = false;
    else if (a == "--global-batch" && i + 1 < argc)
      global_batch = std::stoll(argv[++i]);
  }
  spdlog::set_level(spdlog::level::warn);
  const int kNodes = 64;
  std::string spec_text =
      "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
      "placement: {kind: shards, replication: 1}\n"
      "training: {global_batch: " +
      std::to_string(global_batch) +
      ", min_batch: 8, iterations: 1000, overlap: true, seed: 7}\n"
      "nodes:\n  - name: edge\n    count: 64\n    compute: {fixed_ms: 2.0, per_sample_ms: 0.05}\n"
      "    disk: {read_mbps: 800}\n    link: {up_mbps: 100, down_mbps: 100, latency_ms: 2}\n";
  auto dir = std::filesystem::temp_directory_path() / ("loft-sched-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string spec_path = (dir / "spec.yaml").string();
  {
    FILE* f = std::fopen(spec_path.c_str(), "w");
    std::fputs(spec_text.c_str(), f);
    std::fclose(f);
  }
  auto spec = loft::LoadClusterSpecFile(spec_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.send_hwm = 100000;
  so.recv_hwm = 100000;
  auto router = loft::MakeSocket(ctx, zmq::socket_type::router, so);
  if (!router.ok() || !loft::Bind(*router, "inproc://sched-bench").ok()) return 1;
  std::vector<zmq::socket_t> dealers;
  for (int i = 0; i < kNodes; ++i) {
    loft::SocketOptions d = so;
    d.routing_id = "n" + std::to_string(i);
    auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, d);
    if (!s.ok() || !loft::Connect(*s, "inproc://sched-bench").ok()) return 1;
    dealers.push_back(std::move(*s));
  }
  RouterTransport transport(&*router);
  loft::metrics::Registry registry;
  loft::server::SchedulerOptions opts;
  opts.cluster_spec = spec_path;
  opts.policy = policy;
  opts.journal_dir = (dir / "journal").string();
  opts.insecure = true;
  opts.bind = "inproc://sched-bench";
  opts.journal_sync = sync;
  opts.iterations = iterations + 1;
  opts.heartbeat_timeout_ms = 1000000;
  opts.partition_timeout_ms = 1000000;
  auto t_start = SteadyClock::now();
  auto now = [&] { return Ms(SteadyClock::now() - t_start); };
  auto svc = loft::server::SchedulerService::Create(opts, *spec, &transport, &registry, now());
  if (!svc.ok()) {
    std::fprintf(stderr, "%s\n", svc.status().ToString().c_str());
    return 1;
  }
  loft::server::PeerInfo peer;
  for (int i = 0; i < kNodes; ++i) {
    loft::v1::Envelope e, reply;
    auto* r = e.mutable_register_request();
    r->set_node_name(spec->nodes[i].name);
    r->set_peer_endpoint("tcp://127.0.0.1:1");
    r->set_credits(2);
    int32_t sender = -1;
    if (!(*svc)->Handle(e, peer, now(), &reply, &sender).ok()) return 1;
  }
  std::vector<double> total_ms, plan_send_ms, ack_ms;
  std::vector<loft::v1::Partition> received;
  double makespan = 0;
  for (int it = 0; it <= iterations; ++it) {
    auto a0 = SteadyClock::now();
    for (const auto& p : received) {
      loft::v1::Envelope done, reply;
      auto* d = done.mutable_partition_done();
      d->set_partition_id(p.id());
      d->set_attempt(p.attempt());
      d->set_node(p.worker());
      int32_t sender = -1;
      if (!(*svc)->Handle(done, peer, now(), &reply, &sender).ok()) return 1;
      loft::v1::Envelope cg;
      cg.mutable_credit_grant()->set_node(p.worker());
      cg.mutable_credit_grant()->set_credits(1);
      if (!(*svc)->Handle(cg, peer, now(), &reply, &sender).ok()) return 1;
    }
    auto a1 = SteadyClock::now();
    received.clear();
    Status st = (*svc)->Tick(now());
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    // Every dealer gets its assignment (the views sent at start are skipped).
    for (auto& d : dealers) {
      while (true) {
        auto env = loft::RecvEnvelope(d);
        if (!env.ok()) return 1;
        if (env->has_assignment()) {
          received.push_back(env->assignment().partition());
          makespan = std::max(makespan, env->assignment().partition().predicted_ms());
          break;
        }
      }
    }
    auto a2 = SteadyClock::now();
    if (it == 0) continue;  // warm-up (first plan, views)
    ack_ms.push_back(Ms(a1 - a0));
    plan_send_ms.push_back(Ms(a2 - a1));
    total_ms.push_back(Ms(a2 - a0));
  }
  // The same iterations through the pure JobDriver alone (no journal, no
  // sockets, no service): what planning itself costs.
  std::vector<double> driver_ms;
  {
    auto drv = loft::sched::JobDriver::Create(*spec, policy);
    if (!drv.ok()) return 1;
    double t = 0;
    for (int i = 0; i < kNodes; ++i) (void)(*drv)->RegisterWorker(i, t);
    for (int it = 0; it <= iterations; ++it) {
      auto d0 = SteadyClock::now();
      auto u = (*drv)->PlanNextIteration(t);
      if (!u.ok()) return 1;
      auto parts = loft::sched::JobDriver::PartitionsToSend(*u);
      for (const auto& p : parts) (void)(*drv)->OnPartitionSent(p.id(), p.attempt(), t);
      for (const auto& p : parts) {
        loft::v1::PartitionDone d;
        d.set_partition_id(p.id());
        d.set_attempt(p.attempt());
        d.set_node(p.worker());
        (void)(*drv)->OnPartitionDone(d, t);
      }
      if (it > 0) driver_ms.push_back(Ms(SteadyClock::now() - d0));
      t += 10;
    }
  }
  double driver_mean = 0;
  for (double v : driver_ms) driver_mean += v;
  driver_mean /= static_cast<double>(driver_ms.size());
  double mean = 0;
  for (double v : total_ms) mean += v;
  mean /= static_cast<double>(total_ms.size());
  nlohmann::json j;
  j["benchmark"] = "sched_overhead";
  j["agents"] = kNodes;
  j["policy"] = policy;
  j["global_batch"] = global_batch;
  j["journal_sync"] = sync;
  j["iterations_measured"] = total_ms.size();
  j["mean_overhead_ms"] = mean;
  j["p50_overhead_ms"] = Pct(total_ms, 50);
  j["p95_overhead_ms"] = Pct(total_ms, 95);
  j["mean_acks_ms"] = [&] {
    double s = 0;
    for (double v : ack_ms) s += v;
    return s / static_cast<double>(ack_ms.size());
  }();
  j["mean_plan_journal_send_ms"] = [&] {
    double s = 0;
    for (double v : plan_send_ms) s += v;
    return s / static_cast<double>(plan_send_ms.size());
  }();
  j["driver_only_mean_ms"] = driver_mean;
  j["service_and_transport_mean_ms"] = mean - driver_mean;
  j["predicted_iteration_ms"] = makespan;
  j["overhead_fraction"] = makespan > 0 ? mean / makespan : 0;
  j["target_fraction"] = 0.05;
  std::printf("%s\n", j.dump(2).c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
