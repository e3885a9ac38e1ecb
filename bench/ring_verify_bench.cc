// ring_verify_bench: the cost of verified chunks. N
// members (threads), each with a ZmqTransport on tcp loopback as the
// agents use, run training rounds of the MLP 784-256-128-10: gradient of a
// local batch, RingAllReduce (median), SGD step. Blocks of rounds with the
// plain ring (tolerance 0) and with verified chunks (tolerance f)
// alternate in one run so machine load hits both alike. Prints JSON: per
// mode the median round and all-reduce time (slowest member per round),
// the median process CPU time per round (all threads: a measure of the
// work that machine load does not stretch),
// the bytes each member sends per round, the full copies fetched on a
// dispute (0 without an attacker), and the ratios.
//
// Each member's gradient runs on one OpenBLAS thread, as in the agents
// (--blas-threads 0 keeps OpenBLAS's own default: its idle threads then
// spin beside the ring and make the round time mostly scheduling noise).
//
//   ring_verify_bench [--members 6] [--tolerance 1] [--batch 64] [--rounds 40] [--block 5]
//                     [--blas-threads 1]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "edge_agent/zmq_transport.h"
#include "models/model.h"
#include "models/ring_allreduce.h"
#include "models/sgd.h"

// OpenBLAS: the agents use one BLAS thread each (edge_agent/model_trainer.cc).
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads();

using namespace loft;
using SteadyClock = std::chrono::steady_clock;

namespace {

double Ms(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// CPU time of the whole process (member threads and ZeroMQ I/O threads).
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bytes one member sends per round (d/n floats a chunk) when all replicas
// agree: the plain ring sends n-1 chunks per phase; the verified one (r1 =
// min(f+1, n) primaries) r1(n-1) chunks in the scatter, n-1 full chunks plus
// (r1-1)(n-1) digests of 32 bytes in the all-gather and n-1 dispute bitmaps
// of ceil(n/8) bytes (nothing to the backups: only a dispute escalates).
double BytesPerMember(size_t d, int n, int f) {
  const double chunk = (static_cast<double>(d) / n) * sizeof(float);
  if (f == 0) return 2.0 * (n - 1) * chunk;
  const int r1 = std::min(f + 1, n);
  return (r1 + 1.0) * (n - 1) * chunk + (r1 - 1.0) * (n - 1) * 32 + (n - 1) * ((n + 7) / 8);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"verified-chunk ring vs plain ring, MLP round time"};
  int n = 6, f = 1, batch = 64, rounds = 40, block = 5, blas_threads = 1;
  app.add_option("--members", n, "ring members (threads)")->check(CLI::Range(2, 32));
  app.add_option("--tolerance", f, "f of the verified ring")->check(CLI::Range(1, 15));
  app.add_option("--batch", batch, "samples per member per round")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", rounds, "rounds per mode")->check(CLI::Range(1, 100000));
  app.add_option("--block", block, "rounds per block before switching mode")->check(CLI::Range(1, 1000));
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads (1 = as the agents; 0 = OpenBLAS default)")
      ->check(CLI::Range(0, 64));
  CLI11_PARSE(app, argc, argv);
  if (blas_threads > 0) openblas_set_num_threads(blas_threads);
  rounds = (rounds + block - 1) / block * block;

  // One ZeroMQ context (one I/O thread) per member, as each agent process
  // has its own.
  std::vector<std::unique_ptr<zmq::context_t>> ctxs;
  std::vector<std::unique_ptr<agent::ZmqTransport>> ts;
  std::map<int, std::string> eps;
  for (int r = 0; r < n; ++r) {
    agent::ZmqTransportOptions o;
    o.rank = r;
    o.world_size = n;
    ctxs.push_back(std::make_unique<zmq::context_t>(1));
    auto t = agent::ZmqTransport::Create(ctxs.back().get(), o);
    if (!t.ok()) {
      std::cerr << t.status().ToString() << "\n";
      return 1;
    }
    eps[r] = (*t)->endpoint();
    ts.push_back(std::move(*t));
  }
  for (int r = 0; r < n; ++r) {
    auto others = eps;
    others.erase(r);
    if (Status st = ts[r]->SetPeers(others); !st.ok()) {
      std::cerr << st.ToString() << "\n";
      return 1;
    }
  }

  const int total = 2 * rounds;
  // [mode][round][rank]
  std::vector<std::vector<std::vector<double>>> round_ms(2, std::vector<std::vector<double>>(rounds));
  std::vector<std::vector<std::vector<double>>> ar_ms(2, std::vector<std::vector<double>>(rounds));
  for (int m = 0; m < 2; ++m) {
    for (int i = 0; i < rounds; ++i) {
      round_ms[m][i].assign(n, 0);
      ar_ms[m][i].assign(n, 0);
    }
  }
  std::vector<std::vector<int64_t>> fetched(2, std::vector<int64_t>(n, 0));  // [mode][rank]
  std::vector<double> cpu_at(static_cast<size_t>(total) + 1, 0);  // process CPU at each round's start
  std::barrier sync(n);
  std::vector<std::string> errors(n);
  size_t params = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto model = models::MakeModel(models::ModelKind::kMlp, models::Device::kCpu);
      if (!model.ok()) {
        errors[r] = model.status().ToString();
        return;
      }
      (*model)->Init(7);
      models::SgdOptions so;
      auto sgd = models::Sgd::Create(so, (*model)->num_params());
      if (!sgd.ok()) {
        errors[r] = sgd.status().ToString();
        return;
      }
      std::vector<float> grad(static_cast<size_t>((*model)->num_params()));
      if (r == 0) params = grad.size();
      std::mt19937 rng(100 + r);
      std::vector<uint8_t> images(static_cast<size_t>(batch) * 784), labels(static_cast<size_t>(batch));
      for (auto& x : images) x = static_cast<uint8_t>(rng() % 256);
      for (auto& y : labels) y = static_cast<uint8_t>(rng() % 10);
      std::vector<int> members(n);
      for (int i = 0; i < n; ++i) members[i] = i;
      for (int k = 0; k < total; ++k) {
        const int mode = (k / block) % 2;  // 0 plain, 1 verified
        const int idx = (k / (2 * block)) * block + k % block;
        models::AllReduceOptions ao;
        ao.reducer.kind = models::ReducerKind::kMedian;
        ao.timeout_ms = 60000;
        ao.tolerance = mode == 1 ? f : 0;
        models::RingAllReduce ring(ts[r].get(), ao);
        sync.arrive_and_wait();
        if (r == 0) cpu_at[static_cast<size_t>(k)] = ProcessCpuMs();
        const auto t0 = SteadyClock::now();
        auto loss = (*model)->LossAndGradient(models::BatchView{images, labels}, grad);
        const auto t1 = SteadyClock::now();
        models::AllReduceReport report;
        Status st = loss.ok()
                        ? ring.Run(models::RingView{1, members}, static_cast<uint32_t>(k), grad, {}, &report)
                        : loss.status();
        fetched[mode][r] += report.fetched_copies;
        const auto t2 = SteadyClock::now();
        if (st.ok()) st = sgd->Step((*model)->params(), grad);
        const auto t3 = SteadyClock::now();
        if (!st.ok() && errors[r].empty()) errors[r] = st.ToString();
        round_ms[mode][idx][r] = Ms(t0, t3);
        ar_ms[mode][idx][r] = Ms(t1, t2);
      }
    });
  }
  for (auto& t : threads) t.join();
  cpu_at[static_cast<size_t>(total)] = ProcessCpuMs();
  for (int r = 0; r < n; ++r) {
    if (!errors[r].empty()) {
      std::cerr << "rank " << r << ": " << errors[r] << "\n";
      return 1;
    }
  }
  nlohmann::json out;
  out["members"] = n;
  out["tolerance"] = f;
  out["batch"] = batch;
  out["rounds_per_mode"] = rounds;
  out["params"] = params;
  out["blas_threads"] = openblas_get_num_threads();
  const char* names[2] = {"plain", "verified"};
  double med_round[2], med_ar[2], med_cpu[2];
  for (int m = 0; m < 2; ++m) {
    std::vector<double> rs, as;  // the slowest member of each round
    for (int i = 0; i < rounds; ++i) {
      rs.push_back(*std::max_element(round_ms[m][i].begin(), round_ms[m][i].end()));
      as.push_back(*std::max_element(ar_ms[m][i].begin(), ar_ms[m][i].end()));
    }
    med_round[m] = Median(rs);
    std::vector<double> cpu;  // process CPU from this round's start to the next's
    for (int k = 0; k < total; ++k) {
      if ((k / block) % 2 == m)
        cpu.push_back(cpu_at[static_cast<size_t>(k) + 1] - cpu_at[static_cast<size_t>(k)]);
    }
    med_cpu[m] = Median(cpu);
    med_ar[m] = Median(as);
    out[names[m]] = {{"median_round_ms", med_round[m]},
                     {"median_allreduce_ms", med_ar[m]},
                     {"median_process_cpu_ms", med_cpu[m]},
                     {"bytes_sent_per_member", BytesPerMember(params, n, m == 1 ? f : 0)},
                     {"fetched_copies", std::accumulate(fetched[m].begin(), fetched[m].end(), int64_t{0})}};
  }
  out["round_time_ratio"] = med_round[1] / med_round[0];
  out["allreduce_time_ratio"] = med_ar[1] / med_ar[0];
  out["process_cpu_ratio"] = med_cpu[1] / med_cpu[0];
  out["traffic_ratio"] = BytesPerMember(params, n, f) / BytesPerMember(params, n, 0);
  out["target_round_time_ratio"] = 2.0;
  std::cout << out.dump(2) << "\n";
  return 0;
}
