// ring_compress_bench: what int8 compression (models/chunk_codec.h) saves
// in the ring all-reduce of the MLP's gradient. N members (threads), each
// with a ZmqTransport on tcp loopback as the agents use, all-reduce one
// gradient of the MLP 784-256-128-10 (235,146 floats) per round, with the
// plain ring (f = 0) and verified chunks (f = 1), uncompressed and int8;
// blocks of rounds of the four modes alternate in one run so machine load
// hits all alike. Prints JSON: per mode the bytes each member sent per
// round (counted at the transport), the median all-reduce wall time
// (slowest member per round) and the median process CPU time per round;
// per f the ratios int8 / none; and the int8 result's error relative to the
// uncompressed result of the same inputs: after one round, and of the mean
// output over the rounds with each member feeding its residual back (error
// feedback, as the trainer does; the inputs are the same every round).
//
// Each member's gradient is that of the MLP at its seed-7 initialisation on
// a batch of random images (one per member), computed once.
//
//   ring_compress_bench [--members 6] [--batch 64] [--rounds 20] [--block 5]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "edge_agent/zmq_transport.h"
#include "models/model.h"
#include "models/ring_allreduce.h"

extern "C" void openblas_set_num_threads(int num_threads);

using namespace loft;
using SteadyClock = std::chrono::steady_clock;

namespace {

// Forwards to a transport and counts the payload bytes this member sends.
class CountingTransport final : public models::Transport {
 public:
  explicit CountingTransport(models::Transport* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  Status Send(int to_rank, uint64_t tag, std::span<const std::byte> payload) override {
    sent_bytes += static_cast<int64_t>(payload.size());
    return inner_->Send(to_rank, tag, payload);
  }
  StatusOr<std::vector<std::byte>> Recv(int from_rank, uint64_t tag, int64_t timeout_ms) override {
    return inner_->Recv(from_rank, tag, timeout_ms);
  }
  StatusOr<size_t> RecvInto(int from_rank, uint64_t tag, int64_t timeout_ms,
                            std::span<std::byte> out) override {
    return inner_->RecvInto(from_rank, tag, timeout_ms, out);
  }
  void SetTagFloor(uint64_t floor) override { inner_->SetTagFloor(floor); }
  int64_t sent_bytes = 0;

 private:
  models::Transport* inner_;
};

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

double RelError(const std::vector<double>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    num += (got[k] - want[k]) * (got[k] - want[k]);
    den += static_cast<double>(want[k]) * want[k];
  }
  return std::sqrt(num / den);
}

struct Mode {
  int tolerance;
  models::Compression compression;
  std::string Name() const {
    return std::string(models::CompressionName(compression)) + "_f" + std::to_string(tolerance);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ring all-reduce of the MLP gradient: int8 compression vs none"};
  int n = 6, batch = 64, rounds = 20, block = 5;
  app.add_option("--members", n, "ring members (threads)")->check(CLI::Range(2, 32));
  app.add_option("--batch", batch, "samples per member for its gradient")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", rounds, "rounds per mode")->check(CLI::Range(1, 100000));
  app.add_option("--block", block, "rounds per block before switching mode")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  openblas_set_num_threads(1);
  rounds = (rounds + block - 1) / block * block;
  const std::vector<Mode> modes{{0, models::Compression::kNone},
                                {0, models::Compression::kInt8},
                                {1, models::Compression::kNone},
                                {1, models::Compression::kInt8}};
  const int nm = static_cast<int>(modes.size());

  std::vector<std::unique_ptr<zmq::context_t>> ctxs;
  std::vector<std::unique_ptr<agent::ZmqTransport>> zts;
  std::vector<std::unique_ptr<CountingTransport>> ts;
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
    zts.push_back(std::move(*t));
    ts.push_back(std::make_unique<CountingTransport>(zts.back().get()));
  }
  for (int r = 0; r < n; ++r) {
    auto others = eps;
    others.erase(r);
    if (Status st = zts[r]->SetPeers(others); !st.ok()) {
      std::cerr << st.ToString() << "\n";
      return 1;
    }
  }

  const int total = nm * rounds;
  std::vector<std::vector<std::vector<double>>> ar_ms(nm, std::vector<std::vector<double>>(rounds));
  for (auto& m : ar_ms) {
    for (auto& r : m) r.assign(n, 0);
  }
  std::vector<std::vector<int64_t>> bytes(nm, std::vector<int64_t>(n, 0));  // [mode][rank], all rounds
  std::vector<double> cpu_at(static_cast<size_t>(total) + 1, 0);
  std::vector<std::vector<float>> first(nm);    // rank 0's result of the mode's first round
  std::vector<std::vector<double>> ef_sum(nm);  // rank 0: sum of the outputs with error feedback
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
      std::vector<float> grad(static_cast<size_t>((*model)->num_params()));
      if (r == 0) params = grad.size();
      std::mt19937 rng(100 + r);
      std::vector<uint8_t> images(static_cast<size_t>(batch) * 784), labels(static_cast<size_t>(batch));
      for (auto& x : images) x = static_cast<uint8_t>(rng() % 256);
      for (auto& y : labels) y = static_cast<uint8_t>(rng() % 10);
      if (auto loss = (*model)->LossAndGradient(models::BatchView{images, labels}, grad); !loss.ok()) {
        errors[r] = loss.status().ToString();
      }
      std::vector<int> members(n);
      for (int i = 0; i < n; ++i) members[i] = i;
      std::vector<std::vector<float>> residual(nm, std::vector<float>(grad.size(), 0.0f));
      std::vector<float> data(grad.size());
      for (int k = 0; k < total; ++k) {
        const int m = (k / block) % nm;
        const int idx = (k / (nm * block)) * block + k % block;
        models::AllReduceOptions ao;
        ao.reducer.kind = models::ReducerKind::kTrimmedMean;
        ao.reducer.trim_count = 1;
        ao.timeout_ms = 60000;
        ao.tolerance = modes[m].tolerance;
        ao.compression = modes[m].compression;
        models::RingAllReduce ring(ts[r].get(), ao);
        for (size_t i = 0; i < data.size(); ++i) data[i] = grad[i] + residual[m][i];
        sync.arrive_and_wait();
        if (r == 0) cpu_at[static_cast<size_t>(k)] = ProcessCpuMs();
        const int64_t b0 = ts[r]->sent_bytes;
        const auto t0 = SteadyClock::now();
        Status st =
            ring.Run(models::RingView{1, members}, static_cast<uint32_t>(k), data, {}, nullptr, &residual[m]);
        const auto t1 = SteadyClock::now();
        bytes[m][r] += ts[r]->sent_bytes - b0;
        ar_ms[m][idx][r] = std::chrono::duration<double, std::milli>(t1 - t0).count();
        if (!st.ok() && errors[r].empty()) errors[r] = st.ToString();
        if (r != 0 || !st.ok()) continue;
        if (idx == 0) first[m] = data;
        if (ef_sum[m].empty()) ef_sum[m].assign(data.size(), 0.0);
        for (size_t i = 0; i < data.size(); ++i) ef_sum[m][i] += data[i];
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
  out["params"] = params;
  out["rounds_per_mode"] = rounds;
  out["reducer"] = "trimmed_mean (trim_count 1)";
  std::vector<double> med_ar(nm), med_cpu(nm), per_member(nm);
  for (int m = 0; m < nm; ++m) {
    std::vector<double> as;
    for (int i = 0; i < rounds; ++i) as.push_back(*std::max_element(ar_ms[m][i].begin(), ar_ms[m][i].end()));
    std::vector<double> cpu;
    for (int k = 0; k < total; ++k) {
      if ((k / block) % nm == m)
        cpu.push_back(cpu_at[static_cast<size_t>(k) + 1] - cpu_at[static_cast<size_t>(k)]);
    }
    med_ar[m] = Median(as);
    med_cpu[m] = Median(cpu);
    per_member[m] = static_cast<double>(*std::max_element(bytes[m].begin(), bytes[m].end())) / rounds;
    const size_t chunk = params / static_cast<size_t>(n);
    out[modes[m].Name()] = {{"bytes_sent_per_member", per_member[m]},
                            {"chunk_message_bytes", models::ChunkWireBytes(modes[m].compression, chunk)},
                            {"median_allreduce_ms", med_ar[m]},
                            {"median_process_cpu_ms", med_cpu[m]}};
  }
  for (int f : {0, 1}) {
    const int none = 2 * f, int8 = 2 * f + 1;
    std::vector<double> once(first[int8].begin(), first[int8].end());
    std::vector<double> mean(ef_sum[int8].size());
    for (size_t i = 0; i < mean.size(); ++i) mean[i] = ef_sum[int8][i] / rounds;
    out["f" + std::to_string(f)] = {{"bytes_ratio", per_member[int8] / per_member[none]},
                                    {"allreduce_time_ratio", med_ar[int8] / med_ar[none]},
                                    {"process_cpu_ratio", med_cpu[int8] / med_cpu[none]},
                                    {"int8_rel_error_one_round", RelError(once, first[none])},
                                    {"int8_rel_error_mean_with_feedback", RelError(mean, first[none])}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
