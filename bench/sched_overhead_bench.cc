// Scheduler overhead, two measurements on the same 64-agent cluster (the
// "example cluster" is homogeneous.yaml scaled to 64 nodes with its
// per-node batch kept; its predicted iteration is the plans' makespan):
//
// 1. cost: per iteration, the CPU time SchedulerService needs to take 64
//    PartitionDone acks + CreditGrants, plan the next iteration with the
//    real policy, journal it to RocksDB and stream the 64
//    PartitionAssignments through a ROUTER to 64 DEALER sockets until each
//    has received its partition (BSP, back to back, no compute).
// 2. critical path: what the scheduler adds to each iteration's wall time.
//    The 64 agents are emulated on the same thread as the service (like
//    the daemon's loop): an agent's partition "computes" for its
//    predicted_ms, starting when the agent has it AND every partition of
//    the previous iteration has finished (the training barrier); its ack
//    reaches the service when that time has come. Iteration period = time
//    between consecutive iterations' last finishes; overhead = mean period
//    minus mean makespan. Measured with plan_ahead 0 (strict BSP: plan t+1
//    after t's acks) and plan_ahead 1 (t+1 planned and streamed while t
//    computes, the daemon's default for overlap: true specs).
// Prints JSON.
// --exchange adds training.exchange to the spec (a YAML flow mapping, e.g.
// "{period: 4, compression: int8}"): the scheduler then decides rounds
// (scheduler/exchange_plan.h) on every plan; with model none nothing else
// changes, so the figures compare the planning path with and without it.
//   sched_overhead_bench [--iterations N] [--policy P] [--nosync] [--global-batch B]
//                        [--exchange MAP]
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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
  // When each assignment was handed to the ROUTER (inproc delivers it at
  // once): an emulated agent holds its partition from then on.
  std::map<uint64_t, SteadyClock::time_point> sent_at;
  Status Send(int32_t node, const loft::v1::Envelope& env) override {
    if (env.has_assignment()) sent_at[env.assignment().partition().id()] = SteadyClock::now();
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

// The critical-path measurement (see the header comment).
struct PathResult {
  double mean_period_ms = 0;
  double p95_period_ms = 0;
  double mean_makespan_ms = 0;
  int measured = 0;
  // Split by whether every partition of the iteration was streamed before
  // the previous iteration finished (held by its agent in time).
  int in_time = 0;
  double in_time_overhead_ms = 0, late_overhead_ms = 0;
  int64_t planned_ahead = 0;
};

struct EmulatedAgent {
  struct Held {
    loft::v1::Partition p;
    double received_ms = 0;
  };
  std::deque<Held> queue;      // oldest first (the service sends in iteration order)
  double head_finish_ms = -1;  // -1 = not started yet
  double last_finish_ms = 0;
};

loft::StatusOr<PathResult> CriticalPath(zmq::context_t& ctx, const loft::ClusterSpec& spec,
                                        loft::server::SchedulerOptions opts, int plan_ahead, int iterations) {
  const int nodes = spec.num_nodes();
  const std::string ep = "inproc://sched-path-" + std::to_string(plan_ahead);
  loft::SocketOptions so;
  so.send_hwm = 100000;
  so.recv_hwm = 100000;
  LOFT_ASSIGN_OR_RETURN(zmq::socket_t router, loft::MakeSocket(ctx, zmq::socket_type::router, so));
  LOFT_RETURN_IF_ERROR(loft::Bind(router, ep));
  std::vector<zmq::socket_t> dealers;
  for (int i = 0; i < nodes; ++i) {
    loft::SocketOptions d = so;
    d.routing_id = "n" + std::to_string(i);
    LOFT_ASSIGN_OR_RETURN(zmq::socket_t s, loft::MakeSocket(ctx, zmq::socket_type::dealer, d));
    LOFT_RETURN_IF_ERROR(loft::Connect(s, ep));
    dealers.push_back(std::move(s));
  }
  RouterTransport transport(&router);
  loft::metrics::Registry registry;
  opts.plan_ahead = plan_ahead;
  opts.journal_dir += "-path-" + std::to_string(plan_ahead);
  const int warmup = 3;
  opts.iterations = iterations + warmup;
  const auto t0 = SteadyClock::now();
  auto now = [&] { return Ms(SteadyClock::now() - t0); };
  LOFT_ASSIGN_OR_RETURN(auto svc,
                        loft::server::SchedulerService::Create(opts, spec, "", &transport, &registry, now()));
  loft::server::Sender peer;
  for (int i = 0; i < nodes; ++i) {
    loft::v1::Envelope e, reply;
    auto* r = e.mutable_register_request();
    r->set_node_name(spec.nodes[i].name);
    r->set_peer_endpoint("tcp://127.0.0.1:1");
    r->set_credits(2);
    int32_t sender = -1;
    LOFT_RETURN_IF_ERROR(svc->Handle(e, peer, now(), &reply, &sender));
  }
  std::vector<EmulatedAgent> agents(static_cast<size_t>(nodes));
  std::map<int64_t, double> finish_of;    // iteration -> latest emulated finish of its partitions
  std::map<int64_t, double> makespan_of;  // iteration -> max predicted_ms
  std::map<int64_t, double> barrier;      // iteration -> when all its partitions had finished
  const auto& ledger = svc->driver().state().ledger();
  std::vector<double> periods, makespans;
  std::map<int64_t, double> last_sent_of;  // iteration -> when its last partition was streamed
  int in_time = 0;
  double in_time_over = 0, late_over = 0;
  int64_t next_to_close = 0;
  while (!svc->finished()) {
    // 1. Acks whose emulated finish has come.
    for (int a = 0; a < nodes; ++a) {
      EmulatedAgent& ag = agents[static_cast<size_t>(a)];
      if (ag.queue.empty() || ag.head_finish_ms < 0 || ag.head_finish_ms > now()) continue;
      const loft::v1::Partition& p = ag.queue.front().p;
      loft::v1::Envelope done, credit, reply;
      auto* d = done.mutable_partition_done();
      d->set_partition_id(p.id());
      d->set_attempt(p.attempt());
      d->set_node(p.worker());
      // What a real agent reports: here the partition took its prediction.
      d->mutable_timings()->set_compute_ms(p.predicted_ms());
      credit.mutable_credit_grant()->set_node(p.worker());
      credit.mutable_credit_grant()->set_credits(1);
      int32_t sender = -1;
      LOFT_RETURN_IF_ERROR(svc->Handle(done, peer, now(), &reply, &sender));
      LOFT_RETURN_IF_ERROR(svc->Handle(credit, peer, now(), &reply, &sender));
      finish_of[p.iteration()] = std::max(finish_of[p.iteration()], ag.head_finish_ms);
      ag.last_finish_ms = ag.head_finish_ms;
      ag.head_finish_ms = -1;
      ag.queue.pop_front();
    }
    // Iterations whose partitions are all done: the barrier.
    while (next_to_close < svc->driver().state().next_iteration() &&
           ledger.OpenInIteration(next_to_close) == 0) {
      barrier[next_to_close] = finish_of[next_to_close];
      if (next_to_close >= warmup) {
        periods.push_back(barrier[next_to_close] - barrier[next_to_close - 1]);
        makespans.push_back(makespan_of[next_to_close]);
        const double over = periods.back() - makespans.back();
        if (last_sent_of[next_to_close] <= barrier[next_to_close - 1]) {
          ++in_time;
          in_time_over += over;
        } else {
          late_over += over;
        }
      }
      ++next_to_close;
    }
    // 2. The service's timers: plan, journal, stream.
    LOFT_RETURN_IF_ERROR(svc->Tick(now()));
    // 3. Agents take what arrived.
    for (int a = 0; a < nodes; ++a) {
      while (true) {
        LOFT_ASSIGN_OR_RETURN(auto frames,
                              loft::RecvMultipart(dealers[static_cast<size_t>(a)], /*dontwait=*/true));
        if (frames.empty()) break;
        LOFT_ASSIGN_OR_RETURN(loft::v1::Envelope env_value, loft::Decode(frames[0].to_string_view()));
        const loft::v1::Envelope* env = &env_value;
        if (!env->has_assignment()) continue;
        const loft::v1::Partition& p = env->assignment().partition();
        makespan_of[p.iteration()] = std::max(makespan_of[p.iteration()], p.predicted_ms());
        const double sent = Ms(transport.sent_at.at(p.id()) - t0);
        last_sent_of[p.iteration()] = std::max(last_sent_of[p.iteration()], sent);
        agents[static_cast<size_t>(a)].queue.push_back({p, sent});
      }
    }
    // 4. Start heads whose previous iteration has finished everywhere.
    double next_event = now() + 0.05;
    for (auto& ag : agents) {
      if (ag.queue.empty()) continue;
      if (ag.head_finish_ms < 0) {
        const auto& h = ag.queue.front();
        const int64_t it = h.p.iteration();
        auto b = barrier.find(it - 1);
        if (it > 0 && b == barrier.end()) continue;
        const double start = std::max({h.received_ms, ag.last_finish_ms, it > 0 ? b->second : 0.0});
        ag.head_finish_ms = start + h.p.predicted_ms();
      }
      next_event = std::min(next_event, ag.head_finish_ms);
    }
    const double wait = next_event - now();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
  }
  PathResult r;
  r.measured = static_cast<int>(periods.size());
  for (size_t i = 0; i < periods.size(); ++i) {
    r.mean_period_ms += periods[i];
    r.mean_makespan_ms += makespans[i];
  }
  if (!periods.empty()) {
    r.mean_period_ms /= static_cast<double>(periods.size());
    r.mean_makespan_ms /= static_cast<double>(periods.size());
  }
  r.p95_period_ms = Pct(periods, 95);
  r.in_time = in_time;
  r.in_time_overhead_ms = in_time > 0 ? in_time_over / in_time : 0;
  const int late = r.measured - in_time;
  r.late_overhead_ms = late > 0 ? late_over / late : 0;
  r.planned_ahead = nlohmann::json::parse(svc->StatusJson(now()))["planned_ahead"].get<int64_t>();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 50;
  std::string policy = "loft";
  bool sync = true;
  int64_t global_batch = 8192;  // 128 per agent, as in homogeneous.yaml (512 over 4)
  std::string exchange;         // training.exchange, as YAML (empty: the default)
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
    else if (a == "--exchange" && i + 1 < argc)
      exchange = argv[++i];
  }
  spdlog::set_level(spdlog::level::warn);
  const int kNodes = 64;
  std::string spec_text =
      "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
      "placement: {kind: shards, replication: 1}\n"
      "training: {global_batch: " +
      std::to_string(global_batch) + ", min_batch: 8, iterations: 1000, overlap: true, seed: 7" +
      (exchange.empty() ? "" : ", exchange: " + exchange) +
      "}\n"
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
  opts.plan_ahead = 0;  // the cost part runs iterations back to back, one at a time
  opts.iterations = iterations + 1;
  opts.heartbeat_timeout_ms = 1000000;
  opts.partition_timeout_ms = 1000000;
  auto t_start = SteadyClock::now();
  auto now = [&] { return Ms(SteadyClock::now() - t_start); };
  auto svc = loft::server::SchedulerService::Create(opts, *spec, "", &transport, &registry, now());
  if (!svc.ok()) {
    std::fprintf(stderr, "%s\n", svc.status().ToString().c_str());
    return 1;
  }
  loft::server::Sender peer;
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
      d->mutable_timings()->set_compute_ms(p.predicted_ms());
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
        d.mutable_timings()->set_compute_ms(p.predicted_ms());
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
  // Critical path, strict BSP and planning ahead, same cluster and options.
  svc->reset();
  loft::StatusOr<PathResult> bsp = CriticalPath(ctx, *spec, opts, 0, iterations);
  loft::StatusOr<PathResult> ahead = bsp.ok() ? CriticalPath(ctx, *spec, opts, 1, iterations) : bsp;
  if (!ahead.ok()) {
    std::fprintf(stderr, "critical-path run: %s\n", ahead.status().ToString().c_str());
    return 1;
  }
  auto mean_of = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  auto path_json = [](const PathResult& r) {
    const double over = r.mean_period_ms - r.mean_makespan_ms;
    return nlohmann::json{{"iterations_measured", r.measured},
                          {"mean_makespan_ms", r.mean_makespan_ms},
                          {"mean_period_ms", r.mean_period_ms},
                          {"p95_period_ms", r.p95_period_ms},
                          {"overhead_ms", over},
                          {"overhead_fraction", r.mean_makespan_ms > 0 ? over / r.mean_makespan_ms : 0},
                          {"iterations_planned_ahead", r.planned_ahead},
                          {"iterations_streamed_in_time", r.in_time},
                          {"mean_overhead_ms_streamed_in_time", r.in_time_overhead_ms},
                          {"mean_overhead_ms_streamed_late", r.late_overhead_ms}};
  };
  nlohmann::json j;
  j["benchmark"] = "sched_overhead";
  j["agents"] = kNodes;
  j["policy"] = policy;
  j["exchange"] = exchange.empty() ? "default" : exchange;
  j["global_batch"] = global_batch;
  j["journal_sync"] = sync;
  j["predicted_iteration_ms"] = makespan;
  j["cost_per_iteration"] = {{"iterations_measured", total_ms.size()},
                             {"mean_ms", mean},
                             {"p50_ms", Pct(total_ms, 50)},
                             {"p95_ms", Pct(total_ms, 95)},
                             {"acks_ms", mean_of(ack_ms)},
                             {"plan_journal_send_ms", mean_of(plan_send_ms)},
                             {"driver_only_ms", driver_mean},
                             {"service_and_transport_ms", mean - driver_mean},
                             {"fraction_of_iteration", makespan > 0 ? mean / makespan : 0}};
  j["critical_path"] = {{"plan_ahead_0", path_json(*bsp)}, {"plan_ahead_1", path_json(*ahead)}};
  // The headline: what the scheduler adds to an iteration with the
  // daemon's default for this spec (overlap: true -> plan_ahead 1).
  j["overhead_fraction"] = path_json(*ahead)["overhead_fraction"];
  j["target_fraction"] = 0.05;
  std::printf("%s\n", j.dump(2).c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
